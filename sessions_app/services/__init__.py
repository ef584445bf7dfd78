"""Domain operations: the only writers.

The API, the dashboard, the jobs and the tests call these.
"""
