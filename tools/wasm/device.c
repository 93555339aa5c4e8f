/* device.c - fedvm device (the client phase of a cross-device plan) as a WebAssembly program: 'fedvm-device.js ARGS' runs 'fedvm device ARGS'. */
#include <sys/stat.h>

#include "../cli.h"

int main(int argc, char **argv)
{
    /* Emscripten starts with umask 0777, which would leave the updates unreadable (mode 0) */
    umask(022);
    return fvm_cmd_device(argc - 1, argv + 1);
}
