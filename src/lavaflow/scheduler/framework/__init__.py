"""The scheduling framework: configuration, registry, session (state, plugin callbacks, node selection), statement and memo (what is kept between sessions)."""

from .conf import PluginOption, SchedulerConfiguration, Tier, load_scheduler_conf
from .registry import ACTIONS, PLUGINS, Action, Plugin, register_action, register_plugin
from .session import Session
from .statement import Statement

__all__ = [
    "ACTIONS",
    "PLUGINS",
    "Action",
    "Plugin",
    "PluginOption",
    "SchedulerConfiguration",
    "Session",
    "Statement",
    "Tier",
    "load_scheduler_conf",
    "register_action",
    "register_plugin",
]
