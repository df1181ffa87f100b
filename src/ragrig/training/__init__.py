"""What the training stages share: the split guard and deterministic fine-tuning."""
