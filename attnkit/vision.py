"""Vision transformers (ViT, DeiT, CLIP vision): patch tokens with grid positions."""
