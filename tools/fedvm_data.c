/* fedvm_data.c - 'fedvm data': import Fashion-MNIST, generate synthetic datasets, preprocess, inspect dataset files. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../format/dataset.h"
#include "../format/doc_io.h"
#include "../format/idx.h"
#include "../vm/fedvm.h"
#include "../vm/runtime/partition.h"
#include "../vm/runtime/synthetic.h"
#include "cli.h"

static const char *const usage_data =
    "usage: fedvm data COMMAND [options]\n"
    "\n"
    "Federated datasets: FedJAX SQLite files (read and written) and TFF SQLite\n"
    "files (read). A dataset is a list of clients, each a sequence of examples.\n"
    "\n"
    "commands:\n"
    "  import fashion-mnist [options]        partition Fashion-MNIST over clients into a FedJAX file\n"
    "  synthetic --kind KIND -o FILE         generate a synthetic federated dataset (fedprox, leaf, emnist,\n"
    "                                        shakespeare, stackoverflow)\n"
    "  preprocess shakespeare IN -o OUT      FedJAX's preprocessing: snippets into x/y label sequences\n"
    "  preprocess stackoverflow IN -o OUT    FedJAX's tokenizer: sentences into x/y word-id sequences\n"
    "  info FILE [--split S] [--verify]      format, splits, clients, examples, columns, client sizes\n"
    "  head FILE [CLIENT] [--split S] [-n K] the first K examples of a client as JSON\n"
    "\n"
    "Every command takes --help. The file formats are described in format/DATASETS.md.\n"
    "exit status: 0 success, 1 invalid data or failed command, 2 usage error\n";

static const char *const usage_import =
    "usage: fedvm data import fashion-mnist [--clients N] [--partition P] [--min-size M] [--seed S]\n"
    "                                       [-o FILE] [--source DIR]\n"
    "\n"
    "Reads Fashion-MNIST's IDX files, partitions the 60,000 training images over N\n"
    "clients and writes a FedJAX SQLite file with columns pixels (u8[28,28], raw\n"
    "values 0..255) and label (i32[], 0..9). The 10,000 test images are kept as\n"
    "split 'test', one client 'test'. Client ids are f_00000, f_00001, ...\n"
    "\n"
    "  --clients N      number of clients (default 100)\n"
    "  --partition P    iid: a random permutation cut into N parts of equal size (default)\n"
    "                   shards:K: sorted by label, cut into K*N shards, K at random per client\n"
    "                     (McMahan et al. use shards:2)\n"
    "                   dirichlet:ALPHA: each label spread over the clients in proportions\n"
    "                     drawn from Dirichlet(ALPHA); smaller ALPHA, more skew\n"
    "  --min-size M     dirichlet: redraw until every client has at least M examples (default 10)\n"
    "  --seed S         seed of the partition (default 0); same arguments, same file\n"
    "  -o FILE          output file, replaced atomically (default fashion_mnist.sqlite)\n"
    "  --source DIR     directory of the IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "\n"
    "exit status: 0 written, 1 unreadable source files or a failed write, 2 usage error\n";

static const char *const usage_synthetic =
    "usage: fedvm data synthetic --kind fedprox|leaf [--alpha A --beta B] [--iid] [--clients N]\n"
    "                            [--dim D] [--classes C] [--clusters K] [--min-examples M]\n"
    "                            [--max-examples X] [--test-fraction F] [--seed S] -o FILE\n"
    "       fedvm data synthetic --kind emnist [--clients N] [--only-digits] [--seed S] -o FILE\n"
    "       fedvm data synthetic --kind shakespeare|stackoverflow [--clients N] [--seed S] -o FILE\n"
    "\n"
    "Generates a synthetic federated classification dataset as a FedJAX SQLite file\n"
    "with columns x (f32[D]) and y (i32[], 0..C-1), clients f_00000, f_00001, ...;\n"
    "each client's last fraction F of examples forms split 'test'.\n"
    "\n"
    "  --kind emnist    a stand-in for FedJAX's federated EMNIST-62 with its schema (pixels\n"
    "                   f32[28,28], background 1; label i32[], 62 classes), client ids\n"
    "                   (HASH:fFORM_COPY, so FedJAX's domain_id applies) and sizes (train\n"
    "                   about N(198, 77) per writer, test 11.5%% of it): glyphs of random\n"
    "                   strokes per class, a style per writer (format/DATASETS.md);\n"
    "                   --clients N (default 3400), --only-digits for the 10 digits; a column\n"
    "                   domain_id (i32[], the writer's domain, as Agnostic FedAvg reads it)\n"
    "  --kind shakespeare  a stand-in for FedJAX's federated Shakespeare with its schema\n"
    "                   (snippets: byte strings, one per speaking turn) and sizes (train\n"
    "                   1 + lognormal(2.3, 1.25) snippets per role, heavy-tailed, test\n"
    "                   about 10%% + 1): made-up words by Zipf's law, a voice per role\n"
    "                   (format/DATASETS.md); --clients N (default 715); train it after\n"
    "                   'fedvm data preprocess shakespeare'\n"
    "  --kind stackoverflow  a stand-in for FedJAX's federated Stack Overflow with its schema\n"
    "                   (creation_date, title, tags, tokens, type: byte strings; score i64[];\n"
    "                   a sentence per example) and TFF's splits (held_out: users whose id %% 10\n"
    "                   is 0; train: the others' sentences before 2018-01-01; test: theirs\n"
    "                   after); sentences per user 100 + lognormal(5.2, 1.1), heavy-tailed;\n"
    "                   made-up words by Zipf's law (format/DATASETS.md); --clients N (default\n"
    "                   300); train it after 'fedvm data preprocess stackoverflow'\n"
    "\n"
    "  --kind fedprox   FedProx's Synthetic(A,B) (Li et al.): per client u ~ N(0,A), B_k ~ N(0,B),\n"
    "                   W, b ~ N(u,1), v ~ N(B_k,1), x ~ N(v, diag(j^-1.2)), y = argmax(xW+b);\n"
    "                   sizes floor(lognormal(4,2)) + M\n"
    "  --kind leaf      LEAF's synthetic generator: clustered linear models, sizes\n"
    "                   min(floor(lognormal(3,2)) + M, X)\n"
    "  --alpha A, --beta B  fedprox: model and data heterogeneity (default 1 and 1)\n"
    "  --iid            fedprox: one model and x ~ N(0, diag(j^-1.2)) for every client\n"
    "  --clients N      number of clients (default 30)\n"
    "  --dim D          features per example (default 60)\n"
    "  --classes C      number of labels (default 10)\n"
    "  --clusters K     leaf: clusters of client models (default 1, as LEAF); with 2 or more,\n"
    "                   a column domain_id (i32[], the client's cluster, for Agnostic FedAvg)\n"
    "  --min-examples M the constant added to each size (default 50 fedprox, 5 leaf)\n"
    "  --max-examples X cap on a client's examples, 0 for none (default: none for fedprox,\n"
    "                   1000 for leaf); bound sizes for many clients: --kind leaf --clients\n"
    "                   100000 --min-examples 5 --max-examples 20 writes about 420 MB\n"
    "  --test-fraction F  fraction of each client's examples in split 'test' (default 0.1;\n"
    "                   0 for none)\n"
    "  --seed S         seed (default 0); same arguments, byte-identical file\n"
    "  -o FILE          output file, replaced atomically (required)\n"
    "\n"
    "exit status: 0 written, 1 a failed write, 2 usage error\n";

static const char *const usage_info = "usage: fedvm data info FILE [--split S] [--verify]\n"
                                      "\n"
                                      "Prints the file's format and splits and, for each split (or only S): clients,\n"
                                      "examples, columns with dtypes and per-example shapes ('?' where the length\n"
                                      "varies), and examples per client (min, 10th, 50th and 90th percentiles by\n"
                                      "nearest rank, max). Only the client index is read, not the data.\n"
                                      "\n"
                                      "  --split S   only split S\n"
                                      "  --verify    also decode every client and check it against the columns;\n"
                                      "              exit status 1 if any fails\n"
                                      "\n"
                                      "exit status: 0 success, 1 an unreadable or invalid file (or a client that\n"
                                      "fails --verify), 2 usage error\n";

static const char *const usage_head =
    "usage: fedvm data head FILE [CLIENT] [--split S] [-n K]\n"
    "\n"
    "Prints the first K examples of a client as JSON: {\"split\", \"client\", \"index\",\n"
    "\"examples\", \"head\": [example, ...]}, each example an object of its columns.\n"
    "\n"
    "  CLIENT     a client id, or else an index (default 0, the first client)\n"
    "  --split S  the split (default: the default split of a FedJAX file, the only\n"
    "             split of a TFF file)\n"
    "  -n K       examples to print (default 3)\n"
    "\n"
    "exit status: 0 success, 1 an unreadable or invalid file or client, 2 usage error\n";

static const char *const usage_preprocess =
    "usage: fedvm data preprocess shakespeare IN -o OUT [--sequence-length L]\n"
    "       fedvm data preprocess stackoverflow IN -o OUT [--vocab FILE] [--vocab-size N] [--max-length L]\n"
    "\n"
    "Applies FedJAX's preprocessing (fedjax.datasets.shakespeare.preprocess_client)\n"
    "to every split of IN, a file with a column snippets of byte strings (FedJAX's\n"
    "shakespeare_train.sqlite or shakespeare_test.sqlite, or 'fedvm data synthetic\n"
    "--kind shakespeare'), and writes OUT with the same splits and clients and\n"
    "columns x and y (i32[L]): a client's snippets joined as labels (PAD 0, BOS 1,\n"
    "EOS 2, FedJAX's 86 characters 3..88, other bytes OOV 89), each with BOS\n"
    "before and EOS after, x the sequence but its last label and y but its first,\n"
    "cut into rows of L and padded with PAD. programs/fedavg_shakespeare.json trains\n"
    "on it.\n"
    "\n"
    "  --sequence-length L  labels per row (default 80, as FedJAX's load_data)\n"
    "\n"
    "stackoverflow applies FedJAX's StackoverflowTokenizer (fedjax.datasets.stackoverflow)\n"
    "to every split of IN, a file with a column tokens of byte strings (FedJAX's\n"
    "stackoverflow_*.sqlite, or 'fedvm data synthetic --kind stackoverflow'): each\n"
    "example's words (split at every ' ') as ids, PAD 0, BOS 1, EOS 2, vocabulary word i\n"
    "3 + i, any other word the OOV bucket 3 + N; x = BOS and the words, y = the words\n"
    "and EOS, each truncated or padded with PAD to L. With a column type, also\n"
    "domain_id (i32[], 1 for b'answer', as FedJAX's load_data). programs/\n"
    "fedavg_stackoverflow.json trains on it.\n"
    "\n"
    "  --vocab FILE         the vocabulary: a word per line, or a word and its count\n"
    "                       (FedJAX's stackoverflow.word_count); its first N words.\n"
    "                       Default: the N most frequent words of IN's default (train)\n"
    "                       split, by count, then bytes\n"
    "  --vocab-size N       words in the vocabulary (default 10000, as FedJAX's)\n"
    "  --max-length L       ids per row (default 20, FedJAX's for training; 30 for its\n"
    "                       evaluation)\n"
    "\n"
    "  -o OUT               output file, replaced atomically (required)\n"
    "\n"
    "exit status: 0 written, 1 an unreadable or invalid file or a failed write, 2 usage error\n";

/* ---- helpers ---------------------------------------------------------------- */

/* Progress on stderr for long work, only when stderr is a terminal. */
static void progress(const char *what, int64_t done, int64_t total)
{
    static int tty = -1;
    if (tty < 0)
        tty = isatty(2);
    if (!tty || total <= 0)
        return;
    int64_t step = total / 100 > 0 ? total / 100 : 1;
    if (done % step == 0 || done == total)
        fprintf(stderr, "\r%s: %lld/%lld clients%s", what, (long long)done, (long long)total,
                done == total ? "\n" : "");
}

/* Client ids f_00000, f_00001, ...: zero-padded so that their order is the index order. */
static void client_id(int64_t k, int64_t n, char buf[32])
{
    int width = 5;
    for (int64_t m = n - 1; m >= 100000; m /= 10)
        width++;
    char num[24];
    int len = snprintf(num, sizeof num, "%lld", (long long)k), pad = width > len ? width - len : 0;
    memcpy(buf, "f_", 2);
    memset(buf + 2, '0', (size_t)pad);
    memcpy(buf + 2 + pad, num, (size_t)len + 1);
}

/* Rows [lo, hi) of t, borrowed (no reference taken). */
static fvm_tensor rows_view(const fvm_tensor *t, int64_t lo, int64_t hi)
{
    fvm_tensor v = *t;
    size_t row = t->shape.d[0] ? fvm_tensor_bytes(t) / (size_t)t->shape.d[0] : 0;
    v.shape.d[0] = hi - lo;
    v.offset += (size_t)lo * row;
    return v;
}

static int fail(fvm_diag *d)
{
    cli_print_errors(d);
    fvm_diag_clear(d);
    return EXIT_INVALID;
}

/* ---- import fashion-mnist --------------------------------------------------------- */

/* DIR/NAME.gz, or DIR/NAME when only the uncompressed file exists. */
static fvm_status read_idx(const char *dir, const char *name, fvm_tensor *out, fvm_diag *d)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    if (access(path, F_OK) != 0) {
        char plain[PATH_MAX];
        snprintf(plain, sizeof plain, "%s/%s", dir, name);
        if (access(plain, F_OK) == 0)
            return fvm_idx_read(plain, out, d);
    }
    return fvm_idx_read(path, out, d);
}

/* Images u8[n,28,28] and labels u8[n] as i32 labels. */
static fvm_status read_pair(const char *dir, const char *images, const char *labels, fvm_tensor *x, fvm_tensor *y,
                            fvm_diag *d)
{
    fvm_tensor raw = {0};
    fvm_status s = read_idx(dir, images, x, d);
    if (s == FVM_OK)
        s = read_idx(dir, labels, &raw, d);
    if (s == FVM_OK && (x->dtype != FVM_DTYPE_U8 || x->shape.rank != 3 || x->shape.d[1] != 28 || x->shape.d[2] != 28 ||
                        raw.dtype != FVM_DTYPE_U8 || raw.shape.rank != 1 || raw.shape.d[0] != x->shape.d[0]))
        s = fvm_diag_add(d, FVM_ERR_FORMAT, NULL, "%s/%s and %s: expected u8 images [n,28,28] and u8 labels [n]", dir,
                         images, labels);
    fvm_dims shape = raw.shape;
    if (s == FVM_OK)
        s = fvm_tensor_alloc(y, FVM_DTYPE_I32, &shape, d);
    if (s == FVM_OK) {
        const unsigned char *src = fvm_tensor_data(&raw);
        int32_t *dst = fvm_tensor_data(y);
        for (int64_t i = 0; i < shape.d[0]; i++)
            dst[i] = src[i];
    }
    fvm_tensor_release(&raw);
    if (s) {
        fvm_tensor_release(x);
        fvm_tensor_release(y);
    }
    return s;
}

static int cmd_import(int argc, char **argv)
{
    const char *what = NULL, *out = "fashion_mnist.sqlite", *src = "/usr/share/datasets/fashion-mnist";
    const char *part = "iid";
    long long clients = 100, seed = 0, min_size = FVM_PARTITION_MIN_SIZE;
    bool min_given = false;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_import, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--clients"))) {
            if (!cli_int(v, 1, 60000, &clients))
                return cli_usage_error(usage_import, "--clients needs a number from 1 to 60000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--partition"))) {
            part = v;
        } else if ((v = cli_opt(argc, argv, &i, "--min-size"))) {
            if (!cli_int(v, 0, 60000, &min_size))
                return cli_usage_error(usage_import, "--min-size needs a number from 0 to 60000, found '%s'", v);
            min_given = true;
        } else if ((v = cli_opt(argc, argv, &i, "--seed"))) {
            if (!cli_int(v, LLONG_MIN, LLONG_MAX, &seed))
                return cli_usage_error(usage_import, "--seed needs an integer, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage_error(usage_import, "%s", "-o needs a file name");
            out = v;
        } else if ((v = cli_opt(argc, argv, &i, "--source"))) {
            if (!*v)
                return cli_usage_error(usage_import, "%s", "--source needs a directory");
            src = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_import, argv[i]);
        } else if (what) {
            return cli_usage_error(usage_import, "unexpected '%s'", argv[i]);
        } else {
            what = argv[i];
        }
    }
    if (!what)
        return cli_usage_error(usage_import, "%s", "import needs a dataset name: fashion-mnist");
    if (strcmp(what, "fashion-mnist"))
        return cli_usage_error(usage_import, "unknown dataset '%s'; fedvm imports fashion-mnist", what);
    fvm_diag d = {0};
    fvm_partition_spec spec;
    if (fvm_partition_parse(part, &spec, &d)) {
        int rc = cli_usage_error(usage_import, "%s", d.errs[0].msg);
        fvm_diag_clear(&d);
        return rc;
    }
    if (min_given && spec.kind != FVM_PARTITION_DIRICHLET)
        return cli_usage_error(usage_import, "%s", "--min-size applies to --partition dirichlet:ALPHA only");
    spec.min_size = min_size;

    fvm_tensor x = {0}, y = {0}, tx = {0}, ty = {0};
    fvm_partition p = {0};
    fvm_dataset_writer *w = NULL;
    int rc = EXIT_INVALID;
    if (read_pair(src, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", &x, &y, &d) ||
        read_pair(src, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", &tx, &ty, &d))
        goto done;
    int64_t n = x.shape.d[0];
    if (fvm_partition_make(&spec, fvm_tensor_data(&y), n, clients, (uint64_t)seed, &p, &d) ||
        fvm_dataset_create(out, &w, &d))
        goto done;
    const char *const names[2] = {"pixels", "label"};
    const unsigned char *px = fvm_tensor_data(&x);
    const int32_t *py = fvm_tensor_data(&y);
    for (int64_t k = 0; k < clients; k++) {
        int64_t lo = p.offsets[k], m = p.offsets[k + 1] - lo;
        fvm_tensor cols[2] = {{0}, {0}};
        fvm_dims xs = {.rank = 3, .d = {m, 28, 28}}, ys = {.rank = 1, .d = {m}};
        if (fvm_tensor_alloc(&cols[0], FVM_DTYPE_U8, &xs, &d) || fvm_tensor_alloc(&cols[1], FVM_DTYPE_I32, &ys, &d)) {
            fvm_tensor_release(&cols[0]);
            goto done;
        }
        unsigned char *cx = fvm_tensor_data(&cols[0]);
        int32_t *cy = fvm_tensor_data(&cols[1]);
        for (int64_t j = 0; j < m; j++) {
            int64_t e = p.index[lo + j];
            memcpy(cx + j * 784, px + e * 784, 784);
            cy[j] = py[e];
        }
        char id[32];
        client_id(k, clients, id);
        fvm_status s = fvm_dataset_add(w, NULL, id, strlen(id), 2, names, cols, &d);
        fvm_tensor_release(&cols[0]);
        fvm_tensor_release(&cols[1]);
        if (s)
            goto done;
        progress("import", k + 1, clients);
    }
    const fvm_tensor test[2] = {tx, ty};
    if (fvm_dataset_add(w, "test", "test", 4, 2, names, test, &d))
        goto done;
    fvm_status s = fvm_dataset_finish(w, &d);
    w = NULL;
    if (s)
        goto done;
    fprintf(stderr,
            "%s: %lld clients, %lld training examples (partition %s, seed %lld); split test: 1 client, "
            "%lld examples\n",
            out, clients, (long long)n, part, seed, (long long)tx.shape.d[0]);
    rc = 0;
done:
    fvm_dataset_abort(w);
    fvm_partition_free(&p);
    fvm_tensor_release(&x);
    fvm_tensor_release(&y);
    fvm_tensor_release(&tx);
    fvm_tensor_release(&ty);
    if (rc)
        cli_print_errors(&d);
    fvm_diag_clear(&d);
    return rc;
}

/* ---- synthetic ------------------------------------------------------------------- */

static bool parse_real(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

/* Agnostic FedAvg's per-example domain_id (programs/agnostic_fedavg.json): the client's domain on
 * each of its n examples, a new i32[n] tensor. */
static fvm_status domain_column(int64_t n, int64_t domain, fvm_tensor *t, fvm_diag *d)
{
    fvm_dims sh = {.rank = 1, .d = {n}};
    fvm_status s = fvm_tensor_alloc(t, FVM_DTYPE_I32, &sh, d);
    int32_t *p = s ? NULL : fvm_tensor_data(t);
    for (int64_t i = 0; p && i < n; i++)
        p[i] = (int32_t)domain;
    return s;
}

/* ---- the stand-ins' one writing loop: a generator writes one client at a time ---- */

/* Writes client k's rows, every split it has, and adds them to ctx's counts. */
typedef fvm_status (*client_writer)(void *ctx, int64_t k, fvm_dataset_writer *w, fvm_diag *d);

/* Clients 0..n-1 through f into the file out, replaced atomically (nothing
 * written on failure); false with d set when one fails. */
static bool write_clients(const char *out, int64_t n, client_writer f, void *ctx, fvm_diag *d)
{
    fvm_dataset_writer *w = NULL;
    if (fvm_dataset_create(out, &w, d))
        return false;
    for (int64_t k = 0; k < n; k++) {
        if (f(ctx, k, w, d)) {
            fvm_dataset_abort(w);
            return false;
        }
        progress("synthetic", k + 1, n);
    }
    return fvm_dataset_finish(w, d) == FVM_OK;
}

/* The exit status of a synthetic command, its errors printed. */
static int synthetic_done(bool ok, fvm_diag *d)
{
    if (!ok)
        cli_print_errors(d);
    fvm_diag_clear(d);
    return ok ? 0 : EXIT_INVALID;
}

/* --kind emnist: both splits, client by client (format/DATASETS.md). */
typedef struct {
    fvm_emnist *g;
    int64_t count[2]; /* examples in the training split and in split test */
} emnist_out;

static fvm_status emnist_client(void *ctx, int64_t k, fvm_dataset_writer *w, fvm_diag *d)
{
    emnist_out *o = ctx;
    static const char *const names[3] = {"pixels", "label", "domain_id"};
    char id[32];
    fvm_emnist_client_id(o->g, k, id);
    for (int test = 0; test < 2; test++) {
        fvm_tensor cols[3];
        fvm_status s = fvm_emnist_client(o->g, k, test, &cols[0], &cols[1], d);
        if (s)
            return s;
        s = domain_column(cols[1].shape.d[0], fvm_emnist_domain(k), &cols[2], d);
        if (s == FVM_OK) {
            s = fvm_dataset_add(w, test ? "test" : NULL, id, strlen(id), 3, names, cols, d);
            fvm_tensor_release(&cols[2]);
        }
        o->count[test] += cols[1].shape.d[0];
        fvm_tensor_release(&cols[0]);
        fvm_tensor_release(&cols[1]);
        if (s)
            return s;
    }
    return FVM_OK;
}

static int synthetic_emnist(const char *out, long long clients, bool only_digits, long long seed)
{
    fvm_emnist_config c;
    fvm_emnist_defaults(&c);
    if (clients >= 0)
        c.clients = clients;
    c.only_digits = only_digits;
    c.seed = (uint64_t)seed;
    fvm_diag d = {0};
    emnist_out o = {0};
    bool ok = fvm_emnist_new(&c, &o.g, &d) == FVM_OK && write_clients(out, c.clients, emnist_client, &o, &d);
    if (ok)
        fprintf(stderr, "%s: emnist%s, %lld clients, %lld training examples, %lld in split test (seed %lld)\n", out,
                only_digits ? " digits" : "", (long long)c.clients, (long long)o.count[0], (long long)o.count[1], seed);
    fvm_emnist_free(o.g);
    return synthetic_done(ok, &d);
}

/* --kind shakespeare: both splits, role by role (format/DATASETS.md). */
typedef struct {
    fvm_shakespeare *g;
    int64_t count[2], chars; /* snippets in the training split and in split test; their characters */
} shakespeare_out;

static fvm_status shakespeare_client(void *ctx, int64_t k, fvm_dataset_writer *w, fvm_diag *d)
{
    shakespeare_out *o = ctx;
    char id[64];
    fvm_shakespeare_client_id(o->g, k, id);
    for (int test = 0; test < 2; test++) {
        fvm_dataset_bytes col = {.name = "snippets"};
        uint8_t *bytes;
        int64_t *offsets;
        fvm_status s = fvm_shakespeare_client(o->g, k, test, &bytes, &offsets, &col.n, d);
        if (s)
            return s;
        col.bytes = bytes;
        col.offsets = offsets;
        s = fvm_dataset_add_bytes(w, test ? "test" : NULL, id, strlen(id), 0, NULL, NULL, 1, &col, d);
        o->count[test] += col.n;
        o->chars += offsets[col.n];
        free(bytes);
        free(offsets);
        if (s)
            return s;
    }
    return FVM_OK;
}

static int synthetic_shakespeare(const char *out, long long clients, long long seed)
{
    fvm_shakespeare_config c;
    fvm_shakespeare_defaults(&c);
    if (clients >= 0)
        c.clients = clients;
    c.seed = (uint64_t)seed;
    fvm_diag d = {0};
    shakespeare_out o = {0};
    bool ok = fvm_shakespeare_new(&c, &o.g, &d) == FVM_OK && write_clients(out, c.clients, shakespeare_client, &o, &d);
    if (ok)
        fprintf(stderr,
                "%s: shakespeare, %lld clients, %lld training snippets, %lld in split test, %lld characters (seed "
                "%lld)\n",
                out, (long long)c.clients, (long long)o.count[0], (long long)o.count[1], (long long)o.chars, seed);
    fvm_shakespeare_free(o.g);
    return synthetic_done(ok, &d);
}

/* --kind stackoverflow: the three splits, user by user; a user is in a split
 * only if it has examples there (format/DATASETS.md). */
typedef struct {
    fvm_stackoverflow *g;
    int64_t count[3], users[3]; /* sentences and users of the splits train, held_out and test */
} stackoverflow_out;

static fvm_status stackoverflow_client(void *ctx, int64_t k, fvm_dataset_writer *w, fvm_diag *d)
{
    stackoverflow_out *o = ctx;
    static const char *const splits[3] = {NULL, "held_out", "test"};
    char id[16];
    fvm_stackoverflow_client_id(o->g, k, id);
    fvm_stackoverflow_examples ex[3];
    fvm_status s = fvm_stackoverflow_client(o->g, k, ex, d);
    if (s)
        return s;
    for (int sp = 0; sp < 3 && s == FVM_OK; sp++) {
        if (!ex[sp].n)
            continue;
        fvm_dataset_bytes cols[FVM_STACKOVERFLOW_TEXT_COLUMNS];
        for (int j = 0; j < FVM_STACKOVERFLOW_TEXT_COLUMNS; j++)
            cols[j] = (fvm_dataset_bytes){fvm_stackoverflow_columns[j], ex[sp].n, ex[sp].offsets[j], ex[sp].bytes[j]};
        fvm_dims sh = {.rank = 1, .d = {ex[sp].n}};
        fvm_tensor score;
        const char *const names[1] = {"score"};
        if ((s = fvm_tensor_alloc(&score, FVM_DTYPE_I64, &sh, d)) == FVM_OK) {
            memcpy(fvm_tensor_data(&score), ex[sp].score, (size_t)ex[sp].n * sizeof(int64_t));
            s = fvm_dataset_add_bytes(w, splits[sp], id, strlen(id), 1, names, &score, FVM_STACKOVERFLOW_TEXT_COLUMNS,
                                      cols, d);
            fvm_tensor_release(&score);
        }
        o->count[sp] += ex[sp].n;
        o->users[sp]++;
    }
    for (int sp = 0; sp < 3; sp++)
        fvm_stackoverflow_examples_free(&ex[sp]);
    return s;
}

static int synthetic_stackoverflow(const char *out, long long clients, long long seed)
{
    fvm_stackoverflow_config c;
    fvm_stackoverflow_defaults(&c);
    if (clients >= 0)
        c.clients = clients;
    c.seed = (uint64_t)seed;
    fvm_diag d = {0};
    stackoverflow_out o = {0};
    bool ok =
        fvm_stackoverflow_new(&c, &o.g, &d) == FVM_OK && write_clients(out, c.clients, stackoverflow_client, &o, &d);
    if (ok)
        fprintf(stderr,
                "%s: stackoverflow, %lld clients; train %lld clients, %lld sentences; held_out %lld, %lld; test "
                "%lld, %lld (seed %lld)\n",
                out, (long long)c.clients, (long long)o.users[0], (long long)o.count[0], (long long)o.users[1],
                (long long)o.count[1], (long long)o.users[2], (long long)o.count[2], seed);
    fvm_stackoverflow_free(o.g);
    return synthetic_done(ok, &d);
}

/* --kind fedprox and leaf: each client's examples cut into the training
 * split and, with a test fraction, split test. */
typedef struct {
    fvm_synth *g;
    int64_t clients;
    double test_fraction;
    int64_t train, test; /* examples in each split */
} synth_out;

static fvm_status synth_client(void *ctx, int64_t k, fvm_dataset_writer *w, fvm_diag *d)
{
    synth_out *o = ctx;
    static const char *const names[3] = {"x", "y", "domain_id"};
    fvm_tensor x, y, dom = {0};
    fvm_status s = fvm_synth_client(o->g, k, &x, &y, d);
    if (s)
        return s;
    int64_t n = x.shape.d[0], ntrain = (int64_t)floor((double)n * (1.0 - o->test_fraction));
    int64_t domain = fvm_synth_domain(o->g, k);
    int ncols = domain >= 0 ? 3 : 2; /* LEAF's clusters are domains */
    char id[32];
    client_id(k, o->clients, id);
    s = domain >= 0 ? domain_column(n, domain, &dom, d) : FVM_OK;
    if (s == FVM_OK) {
        fvm_tensor cols[3] = {rows_view(&x, 0, ntrain), rows_view(&y, 0, ntrain), rows_view(&dom, 0, ntrain)};
        s = fvm_dataset_add(w, NULL, id, strlen(id), ncols, names, cols, d);
    }
    if (s == FVM_OK && o->test_fraction > 0) {
        fvm_tensor tcols[3] = {rows_view(&x, ntrain, n), rows_view(&y, ntrain, n), rows_view(&dom, ntrain, n)};
        s = fvm_dataset_add(w, "test", id, strlen(id), ncols, names, tcols, d);
    }
    fvm_tensor_release(&x);
    fvm_tensor_release(&y);
    fvm_tensor_release(&dom);
    if (s == FVM_OK) {
        o->train += ntrain;
        o->test += n - ntrain;
    }
    return s;
}

static int cmd_synthetic(int argc, char **argv)
{
    const char *kind = NULL, *out = NULL;
    fvm_synth_config c;
    fvm_synth_defaults(FVM_SYNTH_FEDPROX, &c);
    long long clients = -1, dim = -1, classes = -1, clusters = -1, minex = -1, maxex = -1, seed = 0;
    double alpha = -1, beta = -1, test_fraction = 0.1;
    bool iid = false, only_digits = false, fraction_given = false;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_synthetic, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--kind"))) {
            if (strcmp(v, "fedprox") && strcmp(v, "leaf") && strcmp(v, "emnist") && strcmp(v, "shakespeare") &&
                strcmp(v, "stackoverflow"))
                return cli_usage_error(usage_synthetic,
                                       "--kind must be fedprox, leaf, emnist, shakespeare or stackoverflow, found '%s'",
                                       v);
            kind = v;
        } else if ((v = cli_opt(argc, argv, &i, "--alpha"))) {
            if (!parse_real(v, 0, 1e6, &alpha))
                return cli_usage_error(usage_synthetic, "--alpha needs a number >= 0, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--beta"))) {
            if (!parse_real(v, 0, 1e6, &beta))
                return cli_usage_error(usage_synthetic, "--beta needs a number >= 0, found '%s'", v);
        } else if (!strcmp(argv[i], "--iid")) {
            iid = true;
        } else if (!strcmp(argv[i], "--only-digits")) {
            only_digits = true;
        } else if ((v = cli_opt(argc, argv, &i, "--clients"))) {
            if (!cli_int(v, 1, FVM_MAX_CLIENTS, &clients))
                return cli_usage_error(usage_synthetic, "--clients needs a number from 1 to 100000000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--dim"))) {
            if (!cli_int(v, 1, 1000000, &dim))
                return cli_usage_error(usage_synthetic, "--dim needs a number from 1 to 1000000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--classes"))) {
            if (!cli_int(v, 2, 1000000, &classes))
                return cli_usage_error(usage_synthetic, "--classes needs a number from 2 to 1000000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--clusters"))) {
            if (!cli_int(v, 1, 1000, &clusters))
                return cli_usage_error(usage_synthetic, "--clusters needs a number from 1 to 1000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--min-examples"))) {
            if (!cli_int(v, 1, 1000000000, &minex))
                return cli_usage_error(usage_synthetic, "--min-examples needs a number >= 1, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--max-examples"))) {
            if (!cli_int(v, 0, 1000000000, &maxex))
                return cli_usage_error(usage_synthetic, "--max-examples needs a number >= 0, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--test-fraction"))) {
            if (!parse_real(v, 0, 0.999999, &test_fraction))
                return cli_usage_error(usage_synthetic, "--test-fraction needs a number in [0, 1), found '%s'", v);
            fraction_given = true;
        } else if ((v = cli_opt(argc, argv, &i, "--seed"))) {
            if (!cli_int(v, LLONG_MIN, LLONG_MAX, &seed))
                return cli_usage_error(usage_synthetic, "--seed needs an integer, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage_error(usage_synthetic, "%s", "-o needs a file name");
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_synthetic, argv[i]);
        } else {
            return cli_usage_error(usage_synthetic, "unexpected '%s'", argv[i]);
        }
    }
    if (!kind)
        return cli_usage_error(usage_synthetic, "%s",
                               "synthetic needs --kind fedprox, leaf, emnist, shakespeare or stackoverflow");
    if (!out)
        return cli_usage_error(usage_synthetic, "%s", "synthetic needs an output file: -o FILE");
    if (!strcmp(kind, "emnist")) {
        if (alpha >= 0 || beta >= 0 || iid || dim >= 0 || classes >= 0 || clusters >= 0 || minex >= 0 || maxex >= 0 ||
            fraction_given)
            return cli_usage_error(usage_synthetic, "%s",
                                   "--kind emnist takes only --clients, --only-digits, --seed and -o");
        if (clients > 410000)
            return cli_usage_error(usage_synthetic, "%s", "--kind emnist makes at most 410000 clients");
        return synthetic_emnist(out, clients, only_digits, seed);
    }
    if (!strcmp(kind, "shakespeare") || !strcmp(kind, "stackoverflow")) {
        if (alpha >= 0 || beta >= 0 || iid || only_digits || dim >= 0 || classes >= 0 || clusters >= 0 || minex >= 0 ||
            maxex >= 0 || fraction_given)
            return cli_usage_error(usage_synthetic, "--kind %s takes only --clients, --seed and -o", kind);
        if (clients > 1000000)
            return cli_usage_error(usage_synthetic, "--kind %s makes at most 1000000 clients", kind);
        return kind[1] == 'h' ? synthetic_shakespeare(out, clients, seed) : synthetic_stackoverflow(out, clients, seed);
    }
    if (only_digits)
        return cli_usage_error(usage_synthetic, "%s", "--only-digits applies to --kind emnist only");
    bool leaf = !strcmp(kind, "leaf");
    if (leaf && (alpha >= 0 || beta >= 0 || iid))
        return cli_usage_error(usage_synthetic, "%s", "--alpha, --beta and --iid apply to --kind fedprox only");
    if (!leaf && clusters >= 0)
        return cli_usage_error(usage_synthetic, "%s", "--clusters applies to --kind leaf only");
    if (iid && (alpha >= 0 || beta >= 0))
        return cli_usage_error(usage_synthetic, "%s", "--iid has one model for all clients: no --alpha or --beta");
    fvm_synth_defaults(leaf ? FVM_SYNTH_LEAF : FVM_SYNTH_FEDPROX, &c);
    c.iid = iid;
    c.seed = (uint64_t)seed;
    if (clients >= 0)
        c.clients = clients;
    if (dim >= 0)
        c.dim = dim;
    if (classes >= 0)
        c.classes = classes;
    if (clusters >= 0)
        c.clusters = clusters;
    if (minex >= 0)
        c.min_examples = minex;
    if (maxex >= 0)
        c.max_examples = maxex;
    if (alpha >= 0)
        c.alpha = alpha;
    if (beta >= 0)
        c.beta = beta;
    if (c.max_examples && c.max_examples < c.min_examples)
        return cli_usage_error(usage_synthetic, "%s", "--max-examples must be 0 (none) or at least --min-examples");

    fvm_diag d = {0};
    synth_out o = {.clients = c.clients, .test_fraction = test_fraction};
    bool ok = fvm_synth_new(&c, &o.g, &d) == FVM_OK && write_clients(out, c.clients, synth_client, &o, &d);
    if (ok) {
        fprintf(stderr, "%s: %s, %lld clients, %lld training examples", out, kind, (long long)c.clients,
                (long long)o.train);
        if (test_fraction > 0)
            fprintf(stderr, ", %lld in split test", (long long)o.test);
        fprintf(stderr, " (seed %lld)\n", seed);
    }
    fvm_synth_free(o.g);
    return synthetic_done(ok, &d);
}

/* ---- preprocess ----------------------------------------------------------------- */

/* The byte strings of column col of a client's examples (u8[?] each):
 * example i the (*lens)[i] bytes at (*bytes)[i], borrowed from seq; both
 * arrays malloc'd, owned by the caller. */
static fvm_status byte_strings(const fvm_value *seq, int col, const uint8_t ***bytes, int64_t **lens, fvm_diag *d)
{
    int64_t n = seq->n;
    const uint8_t **p = calloc((size_t)n + 1, sizeof *p);
    int64_t *l = calloc((size_t)n + 1, sizeof *l);
    if (!p || !l) {
        free(p);
        free(l);
        return fvm_diag_add(d, FVM_ERR_NOMEM, NULL, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        const fvm_tensor *t;
        if (seq->cols) { /* every string of one length: a u8[n, L] tensor */
            t = &seq->cols->items[col]->t;
            l[i] = t->shape.d[1];
            p[i] = (const uint8_t *)fvm_tensor_data(t) + i * l[i];
        } else {
            t = &seq->items[i]->items[col]->t;
            l[i] = t->shape.d[0];
            p[i] = fvm_tensor_data(t);
        }
    }
    *bytes = p;
    *lens = l;
    return FVM_OK;
}

/* How a kind of dataset is preprocessed: its text column and options. */
typedef struct prep {
    bool stackoverflow;
    const char *column; /* snippets or tokens */
    int64_t len; /* Shakespeare's sequence length, Stack Overflow's max_length */
    const fvm_wordtab *vocab; /* Stack Overflow */
} prep;

/* One client: x and y, and for Stack Overflow a domain_id from type (b'answer' 1, else 0) when type_col >= 0. */
static fvm_status preprocess_client(const prep *p, const fvm_value *seq, int col, int type_col, fvm_tensor xy[3],
                                    int *ncols, fvm_diag *d)
{
    const uint8_t **strs = NULL, **types = NULL;
    int64_t *lens = NULL, *tlens = NULL;
    *ncols = 2;
    fvm_status s = byte_strings(seq, col, &strs, &lens, d);
    if (s)
        return s;
    if (!p->stackoverflow) {
        s = fvm_shakespeare_preprocess(seq->n, strs, lens, p->len, &xy[0], &xy[1], d);
    } else if ((s = fvm_stackoverflow_preprocess(p->vocab, seq->n, strs, lens, p->len, &xy[0], &xy[1], d)) == FVM_OK &&
               type_col >= 0) {
        fvm_dims sh = {.rank = 1, .d = {seq->n}};
        if ((s = byte_strings(seq, type_col, &types, &tlens, d)) == FVM_OK &&
            (s = fvm_tensor_alloc(&xy[2], FVM_DTYPE_I32, &sh, d)) == FVM_OK) {
            int32_t *dom = fvm_tensor_data(&xy[2]);
            for (int64_t i = 0; i < seq->n; i++)
                dom[i] = tlens[i] == 6 && !memcmp(types[i], "answer", 6);
            *ncols = 3;
        }
        if (s) {
            fvm_tensor_release(&xy[0]);
            fvm_tensor_release(&xy[1]);
        }
    }
    free(strs);
    free(lens);
    free(types);
    free(tlens);
    return s;
}

/* Column name of ds as u8[?] byte strings: its index, or -1 with an error. */
static int text_column(fvm_dataset *ds, const char *in, const char *split, const char *name, fvm_diag *d)
{
    const fvm_column *cols;
    (void)fvm_dataset_columns(ds, &cols);
    int col = fvm_dataset_column_find(ds, name);
    if (col < 0 || cols[col].dtype != FVM_DTYPE_U8 || cols[col].shape.rank != 1) {
        fvm_diag_add(d, FVM_ERR_TYPE, NULL, "%s, split '%s': needs a column '%s' of byte strings (u8[?])", in, split,
                     name);
        return -1;
    }
    return col;
}

/* Every client of one split of in into the same split of w. */
static int preprocess_split(const prep *p, const char *in, const char *split, fvm_dataset_writer *w, int64_t *rows,
                            fvm_diag *d)
{
    fvm_dataset *ds = NULL;
    if (fvm_dataset_open(in, split, &ds, d))
        return EXIT_INVALID;
    int rc = EXIT_INVALID;
    int col = text_column(ds, in, split, p->column, d), type_col = -1;
    if (col < 0)
        goto done;
    if (p->stackoverflow && fvm_dataset_column_find(ds, "type") >= 0 &&
        (type_col = text_column(ds, in, split, "type", d)) < 0)
        goto done;
    const char *const names[3] = {"x", "y", "domain_id"};
    for (int64_t i = 0; i < fvm_dataset_clients(ds); i++) {
        fvm_value *seq = NULL;
        const void *id;
        size_t id_len;
        int64_t n;
        int ncols;
        if (fvm_dataset_read(ds, i, &seq, d))
            goto done;
        fvm_tensor xy[3];
        fvm_status s = preprocess_client(p, seq, col, type_col, xy, &ncols, d);
        fvm_value_release(seq);
        if (s == FVM_OK) {
            if ((s = fvm_dataset_client(ds, i, &id, &id_len, &n, d)) == FVM_OK)
                s = fvm_dataset_add(w, split, id, id_len, ncols, names, xy, d);
            *rows += xy[0].shape.d[0];
            for (int c = 0; c < ncols; c++)
                fvm_tensor_release(&xy[c]);
        }
        if (s) {
            fvm_diag_add(d, s, NULL, "%s, split '%s': client %lld could not be preprocessed", in, split, (long long)i);
            goto done;
        }
        progress("preprocess", i + 1, fvm_dataset_clients(ds));
    }
    rc = 0;
done:
    fvm_dataset_close(ds);
    return rc;
}

/* Stack Overflow's vocabulary from the word counts of in's default (train) split: its size most frequent words. */
static fvm_status count_vocab(const char *in, int64_t size, fvm_wordtab **out, fvm_diag *d)
{
    fvm_dataset *ds = NULL;
    fvm_wordtab *all = NULL;
    fvm_status s = fvm_dataset_open(in, NULL, &ds, d);
    if (s == FVM_OK)
        s = fvm_wordtab_new(&all, d);
    int col = s == FVM_OK ? text_column(ds, in, "default", "tokens", d) : -1;
    if (s == FVM_OK && col < 0)
        s = FVM_ERR_TYPE;
    for (int64_t i = 0; s == FVM_OK && i < fvm_dataset_clients(ds); i++) {
        fvm_value *seq = NULL;
        const uint8_t **strs = NULL;
        int64_t *lens = NULL;
        if ((s = fvm_dataset_read(ds, i, &seq, d)) == FVM_OK && (s = byte_strings(seq, col, &strs, &lens, d)) == FVM_OK)
            for (int64_t j = 0; s == FVM_OK && j < seq->n; j++)
                s = fvm_wordtab_count(all, strs[j], lens[j], d);
        fvm_value_release(seq);
        free(strs);
        free(lens);
    }
    if (s == FVM_OK)
        s = fvm_wordtab_top(all, size, out, d);
    fvm_wordtab_free(all);
    fvm_dataset_close(ds);
    return s;
}

/* A vocabulary file: a word per line, or FedJAX's stackoverflow.word_count ("word count" per line); its first size
 * words. */
static fvm_status read_vocab(const char *path, int64_t size, fvm_wordtab **out, fvm_diag *d)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fvm_diag_add(d, FVM_ERR_IO, NULL, "%s: cannot open: %s", path, strerror(errno));
    fvm_wordtab *t = NULL;
    fvm_status s = fvm_wordtab_new(&t, d);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    for (long no = 1; s == FVM_OK && fvm_wordtab_size(t) < size && (got = getline(&line, &cap, f)) >= 0; no++) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        char *word = line + strspn(line, " \t"), *end = word + strcspn(word, " \t"), *rest = end + strspn(end, " \t");
        bool added;
        if (end == word || (*rest && rest[strcspn(rest, " \t")] != 0) ||
            (*rest && strspn(rest, "0123456789") != strlen(rest)))
            s = fvm_diag_add(d, FVM_ERR_FORMAT, NULL,
                             "%s:%ld:1: expected a word, or a word and its count, found '%.60s'", path, no, line);
        else if ((s = fvm_wordtab_add(t, (const uint8_t *)word, end - word, 0, &added, d)) == FVM_OK && !added)
            s = fvm_diag_add(d, FVM_ERR_FORMAT, NULL, "%s:%ld:1: '%.*s' is in the vocabulary twice", path, no,
                             (int)(end - word > 60 ? 60 : end - word), word);
    }
    if (s == FVM_OK && ferror(f))
        s = fvm_diag_add(d, FVM_ERR_IO, NULL, "%s: read error", path);
    if (s == FVM_OK && fvm_wordtab_size(t) == 0)
        s = fvm_diag_add(d, FVM_ERR_FORMAT, NULL, "%s: no words", path);
    free(line);
    fclose(f);
    if (s)
        fvm_wordtab_free(t);
    else
        *out = t;
    return s;
}

static int cmd_preprocess(int argc, char **argv)
{
    const char *kind = NULL, *in = NULL, *out = NULL, *vocab_file = NULL;
    long long len = -1, max_length = -1, vocab_size = -1;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_preprocess, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--sequence-length"))) {
            if (!cli_int(v, 1, 100000, &len))
                return cli_usage_error(usage_preprocess,
                                       "--sequence-length needs a number from 1 to 100000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--max-length"))) {
            if (!cli_int(v, 1, 100000, &max_length))
                return cli_usage_error(usage_preprocess, "--max-length needs a number from 1 to 100000, found '%s'", v);
        } else if ((v = cli_opt(argc, argv, &i, "--vocab-size"))) {
            if (!cli_int(v, 1, 100000000, &vocab_size))
                return cli_usage_error(usage_preprocess, "--vocab-size needs a number from 1 to 100000000, found '%s'",
                                       v);
        } else if ((v = cli_opt(argc, argv, &i, "--vocab"))) {
            if (!*v)
                return cli_usage_error(usage_preprocess, "%s", "--vocab needs a file name");
            vocab_file = v;
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            if (!*v)
                return cli_usage_error(usage_preprocess, "%s", "-o needs a file name");
            out = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_preprocess, argv[i]);
        } else if (!kind) {
            kind = argv[i];
        } else if (!in) {
            in = argv[i];
        } else {
            return cli_usage_error(usage_preprocess, "unexpected '%s'", argv[i]);
        }
    }
    if (!kind)
        return cli_usage_error(usage_preprocess, "%s",
                               "preprocess needs the dataset's kind: shakespeare or stackoverflow");
    if (strcmp(kind, "shakespeare") && strcmp(kind, "stackoverflow"))
        return cli_usage_error(usage_preprocess, "the dataset's kind must be shakespeare or stackoverflow, found '%s'",
                               kind);
    prep p = {.stackoverflow = !strcmp(kind, "stackoverflow")};
    if (p.stackoverflow && len >= 0)
        return cli_usage_error(usage_preprocess, "%s",
                               "--sequence-length applies to shakespeare; stackoverflow takes --max-length");
    if (!p.stackoverflow && (max_length >= 0 || vocab_size >= 0 || vocab_file))
        return cli_usage_error(usage_preprocess, "%s",
                               "--max-length, --vocab and --vocab-size apply to stackoverflow only");
    p.column = p.stackoverflow ? "tokens" : "snippets";
    p.len = p.stackoverflow ? (max_length >= 0 ? max_length : 20) : (len >= 0 ? len : 80);
    if (!in)
        return cli_usage_error(usage_preprocess, "%s", "preprocess needs an input file");
    if (!out)
        return cli_usage_error(usage_preprocess, "%s", "preprocess needs an output file: -o OUT");
    fvm_diag d = {0};
    char **splits = NULL;
    int nsplits = 0, rc = EXIT_INVALID;
    int64_t rows = 0, size = vocab_size >= 0 ? vocab_size : 10000;
    fvm_dataset_writer *w = NULL;
    fvm_wordtab *vocab = NULL;
    if (p.stackoverflow && (vocab_file ? read_vocab(vocab_file, size, &vocab, &d) : count_vocab(in, size, &vocab, &d)))
        goto done;
    p.vocab = vocab;
    if (fvm_dataset_splits(in, &splits, &nsplits, &d) || fvm_dataset_create(out, &w, &d))
        goto done;
    for (int k = 0; k < nsplits; k++)
        if (preprocess_split(&p, in, splits[k], w, &rows, &d))
            goto done;
    fvm_status s = fvm_dataset_finish(w, &d);
    w = NULL;
    if (s)
        goto done;
    if (p.stackoverflow)
        fprintf(stderr,
                "%s: stackoverflow, %d split%s, %lld sequences of %lld labels, vocabulary %lld words + 4 (%s)\n", out,
                nsplits, nsplits == 1 ? "" : "s", (long long)rows, (long long)p.len, (long long)fvm_wordtab_size(vocab),
                vocab_file ? vocab_file : "the training split's counts");
    else
        fprintf(stderr, "%s: shakespeare, %d split%s, %lld sequences of %lld labels\n", out, nsplits,
                nsplits == 1 ? "" : "s", (long long)rows, (long long)p.len);
    rc = 0;
done:
    fvm_dataset_abort(w);
    fvm_dataset_free_splits(splits, nsplits);
    fvm_wordtab_free(vocab);
    if (rc)
        cli_print_errors(&d);
    fvm_diag_clear(&d);
    return rc;
}

/* ---- info ----------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A name read from a file, as printed: escaped (fvm_dataset_escape), and in
 * quotes when it holds a space, a comma or an escape. */
static const char *shown(const char *name, char buf[256])
{
    char esc[240];
    fvm_dataset_escape(name, strlen(name), esc, sizeof esc);
    bool plain = *name && !strcmp(esc, name) && !strpbrk(name, " ,");
    snprintf(buf, 256, plain ? "%s" : "'%s'", esc);
    return buf;
}

static void print_columns(const fvm_dataset *ds)
{
    const fvm_column *cols;
    int n = fvm_dataset_columns(ds, &cols);
    printf("  columns:");
    for (int k = 0; k < n; k++) {
        char dims[FVM_DIMS_STR], name[256];
        fvm_dims_format(&cols[k].shape, dims);
        printf("%s %s %s%s", k ? "," : "", shown(cols[k].name, name), fvm_dtype_name(cols[k].dtype), dims);
    }
    printf("%s\n", n ? "" : " (none)");
}

/* The least and greatest size seen in each dim of a column's examples. */
typedef struct span {
    bool any;
    int64_t lo[FVM_MAX_RANK], hi[FVM_MAX_RANK];
} span;

static void see_tensor(span *s, const fvm_tensor *t, int from)
{
    for (int a = from; a < t->shape.rank && a - from < FVM_MAX_RANK; a++) {
        int64_t v = t->shape.d[a];
        if (!s->any || v < s->lo[a - from])
            s->lo[a - from] = v;
        if (!s->any || v > s->hi[a - from])
            s->hi[a - from] = v;
    }
    s->any = true;
}

/* Notes the sizes of a client's examples (a sequence of structs of tensors). */
static void see_dims(const fvm_value *seq, int ncols, span *seen)
{
    for (int k = 0; k < ncols; k++) {
        if (seq->cols) {
            if (seq->n > 0)
                see_tensor(&seen[k], &seq->cols->items[k]->t, 1);
            continue;
        }
        for (int64_t i = 0; i < seq->n; i++)
            see_tensor(&seen[k], &seq->items[i]->items[k]->t, 0);
    }
}

/* What the '?' dims of the columns held across the split: "tag [2..3]". */
static void print_seen(const fvm_column *cols, int ncols, const span *seen)
{
    bool first = true;
    for (int k = 0; k < ncols; k++) {
        bool open = false;
        for (int a = 0; a < cols[k].shape.rank; a++)
            open = open || cols[k].shape.d[a] < 0;
        if (!open || !seen[k].any)
            continue;
        char name[256];
        printf("%s %s [", first ? "  sizes of the ? dims:" : ",", shown(cols[k].name, name));
        for (int a = 0; a < cols[k].shape.rank; a++) {
            if (cols[k].shape.d[a] >= 0 || seen[k].lo[a] == seen[k].hi[a])
                printf("%s%lld", a ? "," : "",
                       (long long)(cols[k].shape.d[a] >= 0 ? cols[k].shape.d[a] : seen[k].lo[a]));
            else
                printf("%s%lld..%lld", a ? "," : "", (long long)seen[k].lo[a], (long long)seen[k].hi[a]);
        }
        printf("]");
        first = false;
    }
    if (!first)
        printf("\n");
}

/* One split's summary; with verify, decodes every client. 0, or EXIT_INVALID. */
static int info_split(const char *file, const char *split, bool verify)
{
    fvm_diag d = {0};
    fvm_dataset *ds = NULL;
    if (fvm_dataset_open(file, split, &ds, &d))
        return fail(&d);
    int64_t n = fvm_dataset_clients(ds), total = 0;
    int64_t *sizes = malloc((size_t)(n ? n : 1) * sizeof *sizes);
    if (!sizes) {
        fvm_dataset_close(ds);
        fprintf(stderr, "fedvm: out of memory\n");
        return EXIT_INVALID;
    }
    int rc = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        const void *id;
        size_t len;
        if (fvm_dataset_client(ds, i, &id, &len, &sizes[i], &d))
            rc = fail(&d);
        total += sizes[i];
    }
    if (rc == 0) {
        char name[256];
        printf("split %s: %lld client%s, %lld examples\n", shown(split, name), (long long)n, n == 1 ? "" : "s",
               (long long)total);
        print_columns(ds);
        if (n) {
            qsort(sizes, (size_t)n, sizeof *sizes, cmp_i64);
            /* nearest rank: the smallest size with at least p% of the clients at or below it */
            int64_t p[3];
            const int pct[3] = {10, 50, 90};
            for (int k = 0; k < 3; k++) {
                int64_t r = (pct[k] * n + 99) / 100;
                p[k] = sizes[r > 0 ? r - 1 : 0];
            }
            printf("  examples per client: min %lld, p10 %lld, p50 %lld, p90 %lld, max %lld\n", (long long)sizes[0],
                   (long long)p[0], (long long)p[1], (long long)p[2], (long long)sizes[n - 1]);
        }
        fflush(stdout);
    }
    span *seen = NULL;
    if (rc == 0 && verify) {
        const fvm_column *cols;
        int ncols = fvm_dataset_columns(ds, &cols);
        seen = calloc((size_t)(ncols ? ncols : 1), sizeof *seen);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            fvm_value *v = NULL;
            if (fvm_dataset_read(ds, i, &v, &d)) {
                bad++;
                cli_print_errors(&d);
                fvm_diag_clear(&d);
            } else if (seen) {
                see_dims(v, ncols, seen);
            }
            fvm_value_release(v);
            progress("verify", i + 1, n);
        }
        if (bad) {
            printf("  verify: %lld of %lld clients failed\n", (long long)bad, (long long)n);
            rc = EXIT_INVALID;
        } else {
            printf("  verify: %s %lld client%s decode%s and match%s the columns\n", n == 1 ? "the" : "all",
                   (long long)n, n == 1 ? "" : "s", n == 1 ? "s" : "", n == 1 ? "es" : "");
            if (seen)
                print_seen(cols, ncols, seen);
        }
    }
    free(seen);
    free(sizes);
    fvm_dataset_close(ds);
    fvm_diag_clear(&d);
    return rc;
}

static int cmd_info(int argc, char **argv)
{
    const char *file = NULL, *split = NULL;
    bool verify = false;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_info, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--split"))) {
            if (!*v)
                return cli_usage_error(usage_info, "%s", "--split needs a split name");
            split = v;
        } else if (!strcmp(argv[i], "--verify")) {
            verify = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_info, argv[i]);
        } else if (file) {
            return cli_usage_error(usage_info, "one file at a time; unexpected '%s'", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file)
        return cli_usage_error(usage_info, "%s", "info needs a dataset FILE");
    fvm_diag d = {0};
    char **splits = NULL;
    int nsplits = 0;
    if (fvm_dataset_splits(file, &splits, &nsplits, &d))
        return fail(&d);
    fvm_dataset *probe = NULL;
    /* The format, from a handle on any split. */
    if (fvm_dataset_open(file, split ? split : nsplits ? splits[0] : NULL, &probe, &d)) {
        fvm_dataset_free_splits(splits, nsplits);
        return fail(&d);
    }
    printf("%s: %s, splits:", file, fvm_dataset_format_title(probe));
    for (int i = 0; i < nsplits; i++) {
        char name[256];
        printf("%s %s", i ? "," : "", shown(splits[i], name));
    }
    printf("\n");
    fvm_dataset_close(probe);
    int rc = 0;
    for (int i = 0; i < nsplits; i++)
        if (!split || !strcmp(split, splits[i])) {
            int r = info_split(file, splits[i], verify);
            rc = rc ? rc : r;
        }
    fvm_dataset_free_splits(splits, nsplits);
    return rc;
}

/* ---- head ----------------------------------------------------------------------- */

/* The id as a JSON string: itself when printable ASCII, else hex "0x...". */
static fvm_doc *id_doc(fvm_arena *a, const void *id, size_t len)
{
    const unsigned char *p = id;
    bool text = true;
    for (size_t k = 0; k < len && text; k++)
        text = p[k] >= 0x20 && p[k] < 0x7f;
    char *s = fvm_arena_alloc(a, 2 * len + 3);
    if (!s)
        return NULL;
    if (text) {
        memcpy(s, id, len);
        s[len] = 0;
    } else {
        strcpy(s, "0x");
        for (size_t k = 0; k < len; k++)
            sprintf(s + 2 + 2 * k, "%02x", p[k]);
    }
    return fvm_doc_string(a, s);
}

static int cmd_head(int argc, char **argv)
{
    const char *file = NULL, *client = NULL, *split = NULL;
    long long k = 3;
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage_head, stdout);
            return 0;
        } else if ((v = cli_opt(argc, argv, &i, "--split"))) {
            if (!*v)
                return cli_usage_error(usage_head, "%s", "--split needs a split name");
            split = v;
        } else if ((v = cli_opt(argc, argv, &i, "-n"))) {
            if (!cli_int(v, 0, 1000000000, &k))
                return cli_usage_error(usage_head, "-n needs a number >= 0, found '%s'", v);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_unknown_option(usage_head, argv[i]);
        } else if (!file) {
            file = argv[i];
        } else if (!client) {
            client = argv[i];
        } else {
            return cli_usage_error(usage_head, "unexpected '%s'", argv[i]);
        }
    }
    if (!file)
        return cli_usage_error(usage_head, "%s", "head needs a dataset FILE");
    fvm_diag d = {0};
    fvm_dataset *ds = NULL;
    if (fvm_dataset_open(file, split, &ds, &d))
        return fail(&d);
    int64_t n = fvm_dataset_clients(ds), idx = client ? fvm_dataset_find(ds, client, strlen(client)) : 0;
    long long asint;
    if (idx < 0 && client && cli_int(client, 0, LLONG_MAX, &asint) && asint < n)
        idx = asint;
    if (idx < 0 || idx >= n) {
        if (n == 0)
            fprintf(stderr, "fedvm: %s: the split has no clients\n", file);
        else
            fprintf(stderr, "fedvm: %s: no client '%s' (give a client id, or an index from 0 to %lld)\n", file,
                    client ? client : "0", (long long)n - 1);
        fvm_dataset_close(ds);
        return EXIT_INVALID;
    }
    fvm_value *seq = NULL;
    fvm_arena a = {0};
    int rc = EXIT_INVALID;
    const void *id;
    size_t id_len;
    int64_t examples;
    if (fvm_dataset_client(ds, idx, &id, &id_len, &examples, &d) != FVM_OK)
        goto done;
    /* The split's name as fvm_dataset_splits lists it. */
    char split_name[256] = "";
    if (split || !strcmp(fvm_dataset_format(ds), "fedjax")) {
        snprintf(split_name, sizeof split_name, "%s", split ? split : "default");
    } else { /* a TFF file opened without a split has exactly one */
        char **splits = NULL;
        int nsplits = 0;
        if (fvm_dataset_splits(file, &splits, &nsplits, &d))
            goto done;
        snprintf(split_name, sizeof split_name, "%s", nsplits ? splits[0] : "");
        fvm_dataset_free_splits(splits, nsplits);
    }
    fvm_doc *top = fvm_doc_new(&a, FVM_DOC_OBJECT), *head = fvm_doc_new(&a, FVM_DOC_ARRAY);
    if (!top || !head || fvm_doc_set(&a, top, "split", fvm_doc_string(&a, split_name)) ||
        fvm_doc_set(&a, top, "client", id_doc(&a, id, id_len)) || fvm_doc_set(&a, top, "index", fvm_doc_int(&a, idx)) ||
        fvm_doc_set(&a, top, "examples", fvm_doc_int(&a, examples)) || fvm_doc_set(&a, top, "head", head) ||
        fvm_dataset_read(ds, idx, &seq, &d))
        goto done;
    /* Each example's type: a struct of the columns. */
    const fvm_column *cols;
    int ncols = fvm_dataset_columns(ds, &cols);
    const char **names = fvm_arena_array(&a, (size_t)ncols + 1, sizeof *names);
    const fvm_type **types = fvm_arena_array(&a, (size_t)ncols + 1, sizeof *types);
    if (!names || !types)
        goto done;
    for (int c = 0; c < ncols; c++) {
        names[c] = cols[c].name;
        if (!(types[c] = fvm_type_tensor(&a, cols[c].dtype, &cols[c].shape)))
            goto done;
    }
    const fvm_type *ex_type = fvm_type_struct(&a, ncols, names, types);
    if (!ex_type)
        goto done;
    for (int64_t i = 0; i < seq->n && i < k; i++) {
        fvm_value *ex = NULL;
        if (fvm_seq_get(seq, i, &ex, &d))
            goto done;
        fvm_status s = fvm_doc_push(&a, head, fvm_value_to_doc(&a, ex, ex_type));
        fvm_value_release(ex);
        if (s)
            goto done;
    }
    char *text = NULL;
    size_t len = 0;
    if (fvm_json_write(top, &text, &len, &d) == FVM_OK) {
        fwrite(text, 1, len, stdout);
        rc = 0;
    }
    free(text);
done:
    if (rc) {
        cli_print_errors(&d);
        if (!d.n)
            fprintf(stderr, "fedvm: out of memory\n");
    }
    fvm_diag_clear(&d);
    fvm_value_release(seq);
    fvm_arena_free(&a);
    fvm_dataset_close(ds);
    return rc;
}

/* ---- dispatch --------------------------------------------------------------------- */

static int unknown_command(const char *cmd)
{
    static const char *const commands[] = {"import", "synthetic", "preprocess", "info", "head", "help"};
    return cli_unknown_command("", "data command", cmd, commands, (int)(sizeof commands / sizeof *commands),
                               usage_data);
}

int fvm_cmd_data(int argc, char **argv)
{
    if (argc < 1) {
        fputs(usage_data, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[0];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        const char *topic = argc > 1 ? argv[1] : "";
        const char *text = !*topic                        ? usage_data
                           : !strcmp(topic, "import")     ? usage_import
                           : !strcmp(topic, "synthetic")  ? usage_synthetic
                           : !strcmp(topic, "preprocess") ? usage_preprocess
                           : !strcmp(topic, "info")       ? usage_info
                           : !strcmp(topic, "head")       ? usage_head
                                                          : NULL;
        if (!text)
            return unknown_command(topic);
        fputs(text, stdout);
        return 0;
    }
    if (!strcmp(cmd, "import"))
        return cmd_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "synthetic"))
        return cmd_synthetic(argc - 1, argv + 1);
    if (!strcmp(cmd, "preprocess"))
        return cmd_preprocess(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "head"))
        return cmd_head(argc - 1, argv + 1);
    return unknown_command(cmd);
}
