"""Task domain operations: the only writers. The API, the dashboard, the jobs and the tests call
these. Every operation that changes a task takes its row lock first (services/locking.py), so
one task's writers queue up while different tasks proceed in parallel."""
