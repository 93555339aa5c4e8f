/* fedvm_privacy.c - fedvm privacy: the privacy accountant (vm/runtime/privacy.h) asked directly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *const fvm_usage_privacy =
    "usage: fedvm privacy --noise-multiplier Z (--q Q | --clients-per-round K --clients N)\n"
    "                     --rounds T --delta D [--every E]\n"
    "\n"
    "The (epsilon, delta) privacy of T rounds of the Poisson-subsampled Gaussian\n"
    "mechanism (DP-FedAvg, DP-SGD): each round every client takes part with\n"
    "probability Q, and the sum of their clipped updates gets Gaussian noise of\n"
    "Z times the clip norm. Renyi DP over TensorFlow Privacy's orders, converted\n"
    "as TensorFlow Privacy does (format/SPEC.md \"Differential privacy\"). The\n"
    "figures 'fedvm run' reports for a program that declares \"privacy\".\n"
    "\n"
    "options:\n"
    "  --noise-multiplier Z   the noise's standard deviation over the clip norm (>= 0)\n"
    "  --q Q                  the sampling probability, in [0, 1]\n"
    "  --clients-per-round K  with --clients N: Q = K / N\n"
    "  --clients N\n"
    "  --rounds T             the number of rounds (>= 0)\n"
    "  --delta D              in (0, 1)\n"
    "  --every E              a line after every E-th round up to T, not only after T\n"
    "\n"
    "Prints one JSON line a round reported: {\"rounds\", \"epsilon\", \"delta\", \"order\"}\n"
    "(the Renyi order that gave epsilon).\n"
    "exit status: 0 success, 2 usage error\n";

static bool parse_real(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end)
        return false;
    *out = v;
    return true;
}

/* x as JSON: the shortest of %.15g, %.16g, %.17g that reads back as x; "inf" for infinity (as fedvm's JSON
 * writer gives it). */
static void print_real(char buf[32], double x)
{
    if (isinf(x)) {
        strcpy(buf, "\"inf\"");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".eE"))
        strcat(buf, ".0");
}

int fvm_cmd_privacy(int argc, char **argv)
{
    const char *u = fvm_usage_privacy;
    double z = -1, q = -1, delta = -1;
    long long rounds = -1, every = 0, per_round = -1, clients = -1;
    bool has_z = false, has_q = false, has_delta = false;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(u, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--noise-multiplier"))) {
            if (!(has_z = parse_real(v, &z)))
                return cli_usage_error(u, "--noise-multiplier needs a number, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--q"))) {
            if (!(has_q = parse_real(v, &q)))
                return cli_usage_error(u, "--q needs a number, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--delta"))) {
            if (!(has_delta = parse_real(v, &delta)))
                return cli_usage_error(u, "--delta needs a number, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--rounds"))) {
            if (!cli_int(v, 0, 1LL << 53, &rounds))
                return cli_usage_error(u, "--rounds needs an integer >= 0, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--every"))) {
            if (!cli_int(v, 1, 1LL << 53, &every))
                return cli_usage_error(u, "--every needs an integer >= 1, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--clients-per-round"))) {
            if (!cli_int(v, 0, 1LL << 53, &per_round))
                return cli_usage_error(u, "--clients-per-round needs an integer >= 0, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--clients"))) {
            if (!cli_int(v, 1, 1LL << 53, &clients))
                return cli_usage_error(u, "--clients needs an integer >= 1, found '%s'", v);
        } else {
            return cli_unknown_option(u, argv[i]);
        }
    }
    if (!has_z)
        return cli_usage_error(u, "%s", "--noise-multiplier is needed");
    if (has_q == (per_round >= 0 || clients >= 0))
        return cli_usage_error(u, "%s", "give either --q or --clients-per-round and --clients");
    if (!has_q) {
        if (per_round < 0 || clients < 0)
            return cli_usage_error(u, "%s", "--clients-per-round and --clients go together");
        if (per_round > clients)
            return cli_usage_error(u, "%s", "--clients-per-round is more than --clients");
        q = (double)per_round / (double)clients;
    }
    if (rounds < 0)
        return cli_usage_error(u, "%s", "--rounds is needed");
    if (!has_delta)
        return cli_usage_error(u, "%s", "--delta is needed");
    long long step = every ? every : rounds ? rounds : 1;
    fvm_diag d = {0};
    int rc = 0;
    for (long long r = rounds ? step : 0;; r += step) {
        if (r > rounds)
            r = rounds;
        double eps, order;
        if (fvm_privacy_epsilon(q, z, r, delta, &eps, &order, &d)) {
            rc = cli_usage_error(u, "%s", d.errs[0].msg);
            break;
        }
        char e[32], de[32], o[32];
        print_real(e, eps);
        print_real(de, delta);
        print_real(o, order);
        printf("{\"rounds\": %lld, \"epsilon\": %s, \"delta\": %s, \"order\": %s}\n", r, e, de, o);
        if (r >= rounds)
            break;
    }
    fvm_diag_clear(&d);
    return rc;
}
