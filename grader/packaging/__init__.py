"""What ships to students and to autograders: the student release, and the Gradescope and PrairieLearn bundles."""
