"""Measuring tools: the bench against CUB."""
