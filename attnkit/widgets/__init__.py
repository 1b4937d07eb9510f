"""anywidget views: Heatmap, HeadGrid, HeadMap, ClusterView, FlowView, ScoreView (front end in js/)."""

from .cluster import ClusterView
from .flow import FlowView
from .headgrid import HeadGrid
from .headmap import HeadMap
from .heatmap import Heatmap
from .measures import MeasureSwitch
from .score import ScoreView

__all__ = ["ClusterView", "FlowView", "HeadGrid", "HeadMap", "Heatmap", "MeasureSwitch", "ScoreView"]
