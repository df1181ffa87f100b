"""What the training stages share: the split guard, the training loop and its stage runs."""
