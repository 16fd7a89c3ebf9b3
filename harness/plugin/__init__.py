"""The pytest plugin: scenario files collected as test items, and its hook specifications."""
