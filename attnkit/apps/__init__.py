"""Applications: the command line, offline reports, the paper pipelines, fine-tuning.
"""
