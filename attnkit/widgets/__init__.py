"""anywidget views: Heatmap, HeadGrid, HeadMap, ClusterView, FlowView, QKScatter, ScoreView,
ImageAttention, CrossView, CheckpointScrubber, InterventionView, CircuitView, RoutesView (front end in
js/)."""

from ..core.results import VIEWS
from .circuit import CircuitView, RoutesView
from .cluster import ClusterView
from .cross import CrossView
from .flow import FlowView
from .headgrid import HeadGrid
from .headmap import HeadMap, composition_map, head_result_map
from .heatmap import Heatmap
from .image import ImageAttention
from .intervention import InterventionView
from .measures import MeasureSwitch
from .qkscatter import QKScatter
from .score import ScoreView
from .scrubber import CheckpointScrubber, scrubber_view

__all__ = ["CheckpointScrubber", "CircuitView", "ClusterView", "CrossView", "FlowView", "HeadGrid", "HeadMap", "Heatmap", "ImageAttention", "InterventionView", "MeasureSwitch",
           "QKScatter", "RoutesView", "ScoreView"]

# How ``Result.widget()`` draws a result that names its view (the core never imports a view).
VIEWS.update({"checkpoint_scrubber": scrubber_view, "composition": composition_map, "head_map": head_result_map, "qk_scatter": QKScatter,
              "score": ScoreView})
