heap-use-after-free xdev_meta_ints format/xdev.c
