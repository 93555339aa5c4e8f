/* fuzz_xdev_files.c - libFuzzer target: the files a cross-device round exchanges (format/xdev_server.c,
 * format/xdev_device.c): states, broadcasts, client updates, block partials and initial weights, each a
 * safetensors file whose metadata ties it to a plan, a round and a client.
 *
 * Two plans are made at the first input, each with its state after init, the broadcast of round 1
 * (all clients) and the clients' updates: tests/xdev/secure_counts.json's (a secure sum and a sum over
 * the 6 clients of tests/xdev/counts_data.json) and programs/fedsgd_linear.json's (a model broadcast,
 * 3 clients of programs/data/linear_clients.json). The input is a role byte, then up to 3 files
 * separated by "@@file@@", in which every "PLAN" x 16 (64 bytes) stands for the plan's id. Bit 4 of
 * the role byte picks the plan; its low 4 bits % 6 the role: 0 updates (aggregated beside the valid
 * updates of the other clients), 1 partials (merged), 2 a state (the next round prepared from it),
 * 3 a broadcast on the device (client 0's update run), 4 a broadcast on the server (aggregated with
 * the valid updates), 5 initial weights (init).
 * With FUZZ_SEEDS=DIR set, the target writes the valid files there as seeds, one a plan and role. */
#include <inttypes.h>
#include <sys/stat.h>

#include "fuzz_util.h"

#include "../../format/ir_read.h"
#include "../../format/xdev.h"
#include "../../vm/transform/plan_form.h"
#include "../../format/xdev_run.h"
#include "../../vm/ir/check.h"
#include "../../vm/transform/passes.h"

#ifndef FUZZ_REPO
#define FUZZ_REPO "."
#endif

#define MAX_POPULATION 6
#define PLACEHOLDER "PLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLANPLAN"

/* A plan and the valid files of its first round. */
typedef struct round {
    const char *program, *data;
    int population;
    fvm_xdev_plan *plan;
    char state0[600], bcast1[600], good[MAX_POPULATION][600], partial0[600], data_arg[600];
    const char *data_args[1];
} round;

static round rounds[2] = {
    {.program = "tests/xdev/secure_counts.json", .data = "tests/xdev/counts_data.json", .population = 6},
    {.program = "programs/fedsgd_linear.json", .data = "programs/data/linear_clients.json", .population = 3}};
static bool ready;

static void must(fvm_status s, fvm_diag *d, const char *what)
{
    if (s != FVM_OK) {
        char *e = d->n ? fvm_error_format(&d->errs[d->n - 1]) : NULL;
        FUZZ_FAIL("setting up the round: %s: %s", what, e ? e : fvm_status_name(s));
    }
}

/* The file at path as a seed for role, the plan's id put back as the placeholder. */
static void seed(const round *r, const char *dir, const char *name, int role, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        FUZZ_FAIL("cannot read %s", path);
    unsigned char *buf = malloc(1 << 20);
    buf[0] = (unsigned char)role;
    size_t n = 1 + fread(buf + 1, 1, (1 << 20) - 1, f);
    fclose(f);
    const char *id = fvm_xdev_id(r->plan);
    for (size_t i = 0; i + 64 <= n; i++)
        if (!memcmp(buf + i, id, 64))
            memcpy(buf + i, PLACEHOLDER, 64);
    char out[1024];
    snprintf(out, sizeof out, "%s/%s_%s", dir, strrchr(r->program, '/') + 1, name);
    fuzz_write(out, buf, n);
    free(buf);
}

static void setup_round(round *r, int k)
{
    fvm_diag d = {0};
    fvm_program *p = NULL;
    char *text = NULL, path[512], name[64];
    size_t len = 0;
    fvm_plan_opts o = {0};
    snprintf(path, sizeof path, "%s/%s", FUZZ_REPO, r->program);
    must(fvm_program_load(path, &p, &d), &d, "load");
    must(fvm_compile(p, &d), &d, "check");
    must(fvm_plan_cross_device(p, &o, &text, &len, &d), &d, "plan");
    fvm_program_free(p);
    snprintf(name, sizeof name, "plan%d.json", k);
    fuzz_write(fuzz_path(path, sizeof path, name), text, len);
    free(text);
    must(fvm_xdev_open(path, FVM_XDEV_CLIENT | FVM_XDEV_SERVER, &r->plan, &d), &d, "open the plan");
    must(fvm_xdev_compile(r->plan, &d), &d, "compile the plan");
    int replaced = 0;
    snprintf(name, sizeof name, "s0-%d.safetensors", k);
    must(fvm_xdev_server_init(r->plan, 5, NULL, fuzz_path(r->state0, sizeof r->state0, name), &replaced, &d), &d,
         "init");
    int64_t round = 0, *clients = NULL, n = 0;
    snprintf(name, sizeof name, "b1-%d.safetensors", k);
    must(fvm_xdev_server_prepare(r->plan, r->state0, r->population, r->population,
                                 fuzz_path(r->bcast1, sizeof r->bcast1, name), &round, &clients, &n, &d),
         &d, "prepare");
    snprintf(r->data_arg, sizeof r->data_arg, "data=%s/%s", FUZZ_REPO, r->data);
    r->data_args[0] = r->data_arg;
    fvm_xdev_device *dev = NULL;
    must(fvm_xdev_device_open(r->plan, r->bcast1, 1, r->data_args, &dev, &d), &d, "device");
    for (int c = 0; c < r->population; c++) {
        snprintf(name, sizeof name, "u%d-%d.safetensors", k, c);
        must(fvm_xdev_device_update(dev, c, fuzz_path(r->good[c], sizeof r->good[c], name), NULL, &d), &d, "update");
    }
    snprintf(name, sizeof name, "p0-%d.safetensors", k);
    must(fvm_xdev_device_partial(dev, clients, n, fuzz_path(r->partial0, sizeof r->partial0, name), NULL, &d), &d,
         "partial");
    fvm_xdev_device_close(dev);
    free(clients);
    fvm_diag_clear(&d);
    const char *dir = getenv("FUZZ_SEEDS");
    if (dir && *dir) {
        int b = k << 4;
        seed(r, dir, "update", b | 0, r->good[0]);
        seed(r, dir, "partial", b | 1, r->partial0);
        seed(r, dir, "state", b | 2, r->state0);
        seed(r, dir, "broadcast_device", b | 3, r->bcast1);
        seed(r, dir, "broadcast_server", b | 4, r->bcast1);
        seed(r, dir, "weights", b | 5, r->state0);
    }
}

/* A fresh directory name under the scratch directory (emptied). */
static const char *fresh_dir(char *buf, size_t n, const char *name)
{
    fuzz_path(buf, n, name);
    fuzz_rm_tree(buf);
    if (mkdir(buf, 0777) != 0)
        FUZZ_FAIL("cannot make %s", buf);
    return buf;
}

static void link_file(const char *from, const char *dir, const char *name)
{
    char to[1024];
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (link(from, to) != 0)
        FUZZ_FAIL("cannot link %s", to);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) {
        setup_round(&rounds[0], 0);
        setup_round(&rounds[1], 1);
        ready = true;
    }
    if (size < 1)
        return 0;
    round *r = &rounds[(data[0] >> 4) & 1];
    int role = (data[0] & 15) % 6;
    fuzz_part parts[3];
    int nparts = fuzz_split(data + 1, size - 1, "@@file@@", parts, 3);
    char files[3][600], dir[600], out[600];
    const char *id = fvm_xdev_id(r->plan);
    for (int k = 0; k < nparts; k++) {
        unsigned char *copy = malloc(parts[k].n ? parts[k].n : 1);
        memcpy(copy, parts[k].p, parts[k].n);
        for (size_t i = 0; i + 64 <= parts[k].n; i++)
            if (!memcmp(copy + i, PLACEHOLDER, 64))
                memcpy(copy + i, id, 64);
        char name[32];
        snprintf(name, sizeof name, "f%d.safetensors", k);
        fuzz_write(fuzz_path(files[k], sizeof files[k], name), copy, parts[k].n);
        free(copy);
    }
    fuzz_path(out, sizeof out, "out.safetensors");
    fvm_diag d = {0};
    fvm_status s = FVM_OK;
    fvm_xdev_result res = {0};
    switch (role) {
    case 0:
    case 1:
        fresh_dir(dir, sizeof dir, "in");
        for (int k = 0; k < nparts; k++)
            link_file(files[k], dir, strrchr(files[k], '/') + 1);
        if (role == 0) {
            for (int c = 1; c < r->population; c++)
                link_file(r->good[c], dir, strrchr(r->good[c], '/') + 1);
            s = fvm_xdev_server_aggregate(r->plan, r->state0, r->bcast1, dir, out, &res, &d);
        } else {
            s = fvm_xdev_server_merge(r->plan, r->state0, r->bcast1, dir, out, &res, &d);
        }
        break;
    case 2: {
        int64_t rnd = 0, *clients = NULL, n = 0;
        s = fvm_xdev_server_prepare(r->plan, files[0], r->population, 2, out, &rnd, &clients, &n, &d);
        if (s == FVM_OK && (n != 2 || rnd < 1))
            FUZZ_FAIL("prepared round %" PRId64 " of %" PRId64 " clients", rnd, n);
        free(clients);
        break;
    }
    case 3: {
        fvm_xdev_device *dev = NULL;
        int64_t index = -1;
        s = fvm_xdev_device_open(r->plan, files[0], 1, r->data_args, &dev, &d);
        if (s == FVM_OK && (s = fvm_xdev_device_client(dev, NULL, 0, &index, &d)) == FVM_OK)
            s = fvm_xdev_device_update(dev, index, out, NULL, &d);
        fvm_xdev_device_close(dev);
        break;
    }
    case 4:
        fresh_dir(dir, sizeof dir, "in");
        for (int c = 0; c < r->population; c++)
            link_file(r->good[c], dir, strrchr(r->good[c], '/') + 1);
        s = fvm_xdev_server_aggregate(r->plan, r->state0, files[0], dir, out, &res, &d);
        break;
    case 5: {
        int replaced = 0;
        s = fvm_xdev_server_init(r->plan, 5, files[0], out, &replaced, &d);
        break;
    }
    }
    fuzz_check_errors(s, &d, 0);
    if (s == FVM_OK && (role <= 1 || role == 4) && (res.round != 1 || res.nclients != r->population || !res.metrics))
        FUZZ_FAIL("aggregated round %" PRId64 " of %" PRId64 " clients", res.round, res.nclients);
    fvm_xdev_result_clear(&res);
    fvm_diag_clear(&d);
    return 0;
}
