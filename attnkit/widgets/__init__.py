"""anywidget views: Heatmap, HeadGrid, HeadMap, ClusterView, FlowView, QKScatter, ScoreView,
ImageAttention, CrossView (front end in js/)."""

from .cluster import ClusterView
from .cross import CrossView
from .flow import FlowView
from .headgrid import HeadGrid
from .headmap import HeadMap
from .heatmap import Heatmap
from .image import ImageAttention
from .measures import MeasureSwitch
from .qkscatter import QKScatter
from .score import ScoreView

__all__ = ["ClusterView", "CrossView", "FlowView", "HeadGrid", "HeadMap", "Heatmap", "ImageAttention", "MeasureSwitch",
           "QKScatter", "ScoreView"]
