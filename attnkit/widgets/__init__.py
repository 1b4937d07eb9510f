"""anywidget views: Heatmap, HeadGrid, HeadMap, ClusterView, FlowView, QKScatter, ScoreView,
ImageAttention (front end in js/)."""

from .cluster import ClusterView
from .flow import FlowView
from .headgrid import HeadGrid
from .headmap import HeadMap
from .heatmap import Heatmap
from .image import ImageAttention
from .measures import MeasureSwitch
from .qkscatter import QKScatter
from .score import ScoreView

__all__ = ["ClusterView", "FlowView", "HeadGrid", "HeadMap", "Heatmap", "ImageAttention", "MeasureSwitch",
           "QKScatter", "ScoreView"]
