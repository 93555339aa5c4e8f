/* plot_none.c - fedvm plot in a build without cairo (make PLOT=no): says so, draws nothing. */
#include <stdio.h>

#include "cli.h"

const char *const fvm_usage_plot = "usage: fedvm plot FILE.jsonl... -o OUT.svg|OUT.png [options]\n"
                                   "\n"
                                   "Draws training curves from the metrics files that 'fedvm run --metrics' writes,\n"
                                   "but this fedvm was built without cairo (make PLOT=no, or cairo's development\n"
                                   "files missing): install libcairo2-dev and libfontconfig-dev (make deps) and\n"
                                   "rebuild (make), or plot the metrics files with a fedvm that has it.\n";

int fvm_cmd_plot(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fedvm: plot: this fedvm was built without cairo, so it cannot draw pictures: install "
                    "libcairo2-dev and libfontconfig-dev (make deps) and rebuild (make)\n");
    return EXIT_INVALID;
}
