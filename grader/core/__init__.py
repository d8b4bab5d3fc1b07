"""The data every other layer shares, importing nothing else of the grader: errors, failure kinds, results, the memory-access profile's model, and the cleaner of text a student controls."""
