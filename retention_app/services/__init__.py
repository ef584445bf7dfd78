"""Retention's domain operations: policies, holds, compaction, enforcement, runs."""
