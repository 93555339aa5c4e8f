memory read_examples format/dataset_tff.c
