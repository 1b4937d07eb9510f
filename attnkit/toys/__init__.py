"""Trained toy models with known answers, and their recipes.
"""
