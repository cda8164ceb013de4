"""Dagster definitions over holodeck_core: assets, partitions, resources, schedules, sensors."""
