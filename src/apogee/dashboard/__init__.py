"""The web dashboard (``apogee dashboard``): clusters, topics, groups, producers, messages and
live charts over the remoting protocol, through ``apogee.admin`` and ``apogee.client`` only, so
it also works against an Apache RocketMQ 4.9 cluster.  docs/dashboard.md."""

from apogee.dashboard.app import create_app
from apogee.dashboard.settings import DashboardSettings

__all__ = ["DashboardSettings", "create_app"]
