"""Loads the harness's pytest plugin (``conformance/plugin.py``) for ``pytest conformance`` in a checkout
where the ``pytest11`` entry point of an installed kraft-tck is not loaded (``-p no:kraft_tck``,
``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, or a checkout used without installing it). Wherever the entry point is
loaded this file does nothing: registering the plugin twice would add its options twice."""

from __future__ import annotations

import pytest
from kraft_tck.conformance import plugin

PLUGIN_NAME = "kraft_tck"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.is_registered(plugin) and not pluginmanager.is_blocked(PLUGIN_NAME):
        pluginmanager.register(plugin, PLUGIN_NAME)
