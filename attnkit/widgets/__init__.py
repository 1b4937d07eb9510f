"""anywidget views: Heatmap, HeadGrid, HeadMap, ClusterView (front end in js/)."""

from .cluster import ClusterView
from .headgrid import HeadGrid
from .headmap import HeadMap
from .heatmap import Heatmap

__all__ = ["ClusterView", "HeadGrid", "HeadMap", "Heatmap"]
