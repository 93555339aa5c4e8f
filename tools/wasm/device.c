/* device.c - fedvm device (the client phase of a cross-device plan) as a WebAssembly program: 'fedvm-device.js ARGS' runs 'fedvm device ARGS'. */
#include "../cli.h"

int main(int argc, char **argv)
{
    return fvm_cmd_device(argc - 1, argv + 1);
}
