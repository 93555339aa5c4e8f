/* fedvm_plot.c - fedvm plot: training curves from metrics files, drawn with cairo as SVG or PNG.
 *
 * format/metrics reads the files into series; everything here is presentation:
 * which series go in which panel, the layout, the axes and the legend. */
#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../format/doc_io.h"
#include "../format/metrics.h"
#include "cli.h"

const char *const fvm_usage_plot =
    "usage: fedvm plot FILE.jsonl... -o OUT.svg|OUT.png [--label NAME]... [--metric NAME]...\n"
    "                  [--title TEXT] [--size WxH]\n"
    "       fedvm plot SWEEP/index.json -o OUT.svg|OUT.png [options]\n"
    "\n"
    "Draws training curves from the metrics files that 'fedvm run --metrics' writes:\n"
    "one panel per metric against the round (by default loss above accuracy; a panel\n"
    "that no file has is left out), each FILE a run in its own colour, evaluation\n"
    "solid and training dashed, and a legend naming the runs.\n"
    "\n"
    "  -o OUT          the picture, replaced atomically: .svg (vector) or .png (bitmap)\n"
    "  --label NAME    a run's name in the legend, given in the order of the files\n"
    "                  (repeat; default: the file's name without .jsonl)\n"
    "  --metric NAME   a panel for NAME (repeat, top to bottom; default: loss, accuracy):\n"
    "                  the series eval.NAME and train.NAME, a field of the lines such as\n"
    "                  seconds or clients, or any series by its full name (train.examples)\n"
    "  --title TEXT    a title above the panels\n"
    "  --size WxH      the picture's size in pixels (default: 800 wide, 240 high per panel)\n"
    "\n"
    "A sweep's index (fedvm run --grid/--seeds) draws one curve per configuration:\n"
    "the mean over its seeds at each round, in a band of plus and minus one\n"
    "standard deviation (the sample's, over the seeds), labelled by its values.\n"
    "\n"
    "A line's numbers are found through nested objects and named by their path\n"
    "(train.loss, eval.accuracy, seconds); 'round' is the x axis. When a file holds\n"
    "a run appended after another, each round is drawn from its last line.\n"
    "exit status: 0 written, 1 a file unreadable or without metrics, 2 usage error\n";

/* ---- what to draw ------------------------------------------------------------ */

typedef enum kind { KIND_EVAL, KIND_TRAIN, KIND_OTHER } kind;

typedef struct run {
    const char *file, *label;
    fvm_metrics *m;
    fvm_metrics *spread; /* a sweep's configuration: the standard deviations of m's means, or NULL */
} run;

/* One curve: a run's series in a panel. */
typedef struct curve {
    const fvm_series *s;
    const fvm_series *spread; /* its band's half-width at each point, or NULL */
    int run; /* its colour */
    kind k;
} curve;

typedef struct panel {
    const char *metric; /* the y axis's label */
    curve *curves;
    int ncurves;
    double lo, hi, step; /* the y axis */
    double top; /* the plot area's top, once laid out */
} panel;

typedef struct plot {
    run *runs;
    int nruns;
    panel *panels;
    int npanels;
    const char *title;
    double w, h;
    double xlo, xhi, xstep;
    /* layout: the plot areas span [left, right], each ph high, gap apart */
    double left, right, ph, gap;
    double legend_x, legend_w;
    bool has_kind[3];
} plot;

static kind kind_of(const char *name)
{
    if (!strcmp(name, "train") || !strncmp(name, "train.", 6))
        return KIND_TRAIN;
    if (!strcmp(name, "eval") || !strncmp(name, "eval.", 5))
        return KIND_EVAL;
    return KIND_OTHER;
}

/* The series of run r that a panel for metric shows: the series called
 * metric itself, eval.metric and train.metric. */
static int find_series(const fvm_metrics *m, const char *metric, const fvm_series *out[3])
{
    int n = 0;
    const fvm_series *s = fvm_metrics_get(m, metric);
    if (s)
        out[n++] = s;
    char name[256];
    static const char *const prefixes[] = {"eval.", "train."};
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "%s%s", prefixes[i], metric);
        if ((s = fvm_metrics_get(m, name)))
            out[n++] = s;
    }
    return n;
}

/* A point that is drawn: NaN and infinities (and values so large that their
 * ranges overflow) leave a gap. */
static bool finite_point(const fvm_series *s, size_t i)
{
    return fabs(s->values[i]) < 1e300;
}

/* A step of 1, 2, 2.5 or 5 times a power of ten giving about 'target'
 * intervals over range; whole numbers only when integral. */
static double nice_step(double range, int target, bool integral)
{
    double raw = range / target;
    double mag = pow(10, floor(log10(raw)));
    double f = raw / mag;
    double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    double step = nice * mag;
    if (integral && step < 1)
        step = 1;
    if (integral && step != floor(step))
        step = 2 * mag; /* 2.5 -> 2 */
    return step;
}

/* An axis from lo to hi with ends on multiples of the step. */
static void nice_axis(double lo, double hi, int target, bool integral, double *alo, double *ahi, double *astep)
{
    if (!(hi - lo >
          fmax(fabs(lo), fabs(hi)) * 1e-9)) { /* one value (to the precision of a double): a range around it */
        double pad = integral ? 1 : lo != 0 ? fabs(lo) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }
    double step = nice_step(hi - lo, target, integral);
    *alo = floor(lo / step + 1e-9) * step;
    *ahi = ceil(hi / step - 1e-9) * step;
    *astep = step;
}

/* The number of steps from lo to hi on an axis from nice_axis. */
static int intervals(double lo, double hi, double step)
{
    double n = round((hi - lo) / step);
    return n >= 1 && n <= 100 ? (int)n : 1;
}

/* "a, b, c": the series names of every run (each once; the first 20, then
 * how many more), for error messages. A file's names are distinct, so only
 * the files before it can have one of them. */
static void print_series_names(const plot *p)
{
    size_t printed = 0;
    for (int r = 0; r < p->nruns; r++) {
        const fvm_metrics *m = p->runs[r].m;
        for (size_t i = 0; i < m->nseries; i++) {
            bool seen = false;
            for (int q = 0; q < r && !seen; q++)
                seen = fvm_metrics_get(p->runs[q].m, m->series[i].name) != NULL;
            if (!seen && printed++ < 20)
                fprintf(stderr, "%s%s", printed > 1 ? ", " : "", m->series[i].name);
        }
    }
    if (printed > 20)
        fprintf(stderr, " and %zu more", printed - 20);
}

/* Puts each run's series of every metric in panels; panels that no run has
 * are dropped unless 'explicit'. */
static int build_panels(plot *p, const char **metrics, int nmetrics, bool explicit)
{
    p->panels = calloc((size_t)nmetrics, sizeof *p->panels);
    if (!p->panels)
        goto nomem;
    bool any_x = false;
    double xlo = 0, xhi = 0;
    for (int i = 0; i < nmetrics; i++) {
        panel *pn = &p->panels[p->npanels];
        pn->metric = metrics[i];
        pn->curves = calloc((size_t)p->nruns * 3, sizeof *pn->curves);
        if (!pn->curves)
            goto nomem;
        bool any_y = false, behind = false;
        double lo = 0, hi = 0;
        for (int r = 0; r < p->nruns; r++) {
            const fvm_series *found[3];
            int n = find_series(p->runs[r].m, metrics[i], found);
            for (int k = 0; k < n; k++) {
                const fvm_series *sp = p->runs[r].spread ? fvm_metrics_get(p->runs[r].spread, found[k]->name) : NULL;
                curve c = {found[k], sp && sp->n == found[k]->n ? sp : NULL, r, kind_of(found[k]->name)};
                behind = behind || c.k != KIND_TRAIN;
                pn->curves[pn->ncurves++] = c;
            }
        }
        for (int k = 0; k < pn->ncurves; k++) {
            curve *c = &pn->curves[k];
            if (behind && c->k == KIND_TRAIN)
                c->spread = NULL; /* a band only on the curves in front */
            for (size_t j = 0; j < c->s->n; j++) {
                if (!finite_point(c->s, j))
                    continue;
                double x = (double)c->s->rounds[j], y = c->s->values[j];
                double half = c->spread && finite_point(c->spread, j) ? c->spread->values[j] : 0;
                lo = any_y ? fmin(lo, y - half) : y - half;
                hi = any_y ? fmax(hi, y + half) : y + half;
                xlo = any_x ? fmin(xlo, x) : x;
                xhi = any_x ? fmax(xhi, x) : x;
                any_x = any_y = true;
            }
        }
        if (!pn->ncurves) {
            free(pn->curves);
            if (explicit) {
                fprintf(stderr, "fedvm: no file has the metric '%s' (%s: ", metrics[i],
                        p->nruns == 1 ? "the file has" : "the files have");
                print_series_names(p);
                fprintf(stderr, ")\n");
                return EXIT_INVALID;
            }
            continue;
        }
        if (!any_y) {
            fprintf(stderr, "fedvm: the metric '%s' has no finite values to draw\n", metrics[i]);
            p->npanels++; /* freed with the others */
            return EXIT_INVALID;
        }
        for (int k = 0; k < pn->ncurves; k++)
            p->has_kind[pn->curves[k].k] = true;
        /* A margin keeps curves off the frame, but does not cross 0 or 1
         * (a loss stays above 0, an accuracy below 1). */
        double margin = (hi - lo) * 0.03, plo = lo - margin, phi = hi + margin;
        if (lo >= 0 && plo < 0)
            plo = 0;
        if (hi <= 1 && phi > 1)
            phi = 1;
        nice_axis(plo, phi, 5, false, &pn->lo, &pn->hi, &pn->step);
        p->npanels++;
    }
    if (p->npanels)
        nice_axis(xlo, xhi, 7, true, &p->xlo, &p->xhi, &p->xstep);
    return 0;
nomem:
    fprintf(stderr, "fedvm: out of memory\n");
    return EXIT_INVALID;
}

/* ---- labels -------------------------------------------------------------------- */

/* The last 'parts' path components of file, without a final .jsonl (a pointer into file or into buf). */
static const char *tail_name(const char *file, int parts, char *buf, size_t size)
{
    const char *start = file + strlen(file);
    while (start > file && start[-1] == '/')
        start--;
    const char *end = start;
    for (int k = 0; k < parts && start > file; k++) {
        if (k)
            start--; /* the slash */
        while (start > file && start[-1] != '/')
            start--;
    }
    size_t n = (size_t)(end - start);
    if (n > 6 && !strncmp(end - 6, ".jsonl", 6))
        n -= 6;
    snprintf(buf, size, "%.*s", (int)n, start);
    return buf;
}

/* Default labels: base names, with as many parent folders as it takes to
 * tell apart the files that have no --label. */
static void default_labels(plot *p, char (*bufs)[256])
{
    int parts = 1;
    for (bool clash = true; clash && parts <= 8; parts += clash) {
        clash = false;
        for (int r = 0; r < p->nruns && !clash; r++) {
            char mine[256], other[256];
            if (p->runs[r].label)
                continue;
            tail_name(p->runs[r].file, parts, mine, sizeof mine);
            for (int q = r + 1; q < p->nruns && !clash; q++)
                clash = !p->runs[q].label && !strcmp(tail_name(p->runs[q].file, parts, other, sizeof other), mine);
        }
    }
    for (int r = 0; r < p->nruns; r++)
        if (!p->runs[r].label)
            p->runs[r].label = tail_name(p->runs[r].file, parts, bufs[r], sizeof bufs[r]);
}

/* Text of a tick value with as many decimals as the step needs. */
static void tick_text(char *buf, size_t size, double v, double step)
{
    if (fabs(v) < step * 1e-6)
        v = 0; /* no "-0" */
    double mag = fmax(fabs(v), step);
    if (mag >= 1e6 || step < 1e-5) {
        snprintf(buf, size, "%g", v);
        return;
    }
    int dec = 0;
    while (dec < 6 && fabs(step * pow(10, dec) - round(step * pow(10, dec))) > 1e-6 * step * pow(10, dec))
        dec++;
    snprintf(buf, size, "%.*f", dec, v);
}

/* ---- drawing ------------------------------------------------------------------- */

enum { FONT_TICK = 11, FONT_LABEL = 12, FONT_TITLE = 15 };
static const double PAD = 12, TICK = 4, PANEL_H = 240, GAP = 18, SWATCH = 26;

/* tab10, the matplotlib palette, without its grey. */
static const double palette[][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741},
    {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812},
};
#define NCOLORS (sizeof palette / sizeof palette[0])

/* Text is laid out with unhinted metrics, so that it takes the same width
 * when measured, in an SVG and in a PNG. */
static void set_font_options(cairo_t *cr)
{
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
}

static void set_font(cairo_t *cr, double size, bool bold)
{
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* The height of a digit above the baseline, for centring text vertically. */
static double cap_height(cairo_t *cr)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, "0", &e);
    return -e.y_bearing;
}

/* Text with its anchor at (x, y): ax 0 left, 0.5 centre, 1 right; ay 0 top
 * of the digits, 0.5 their middle, 1 the baseline. */
static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay)
{
    double cap = cap_height(cr);
    cairo_move_to(cr, x - ax * text_width(cr, s), y + (1 - ay) * cap);
    cairo_show_text(cr, s);
}

/* s shortened with an ellipsis to fit width (in buf). */
static const char *fit_text(cairo_t *cr, const char *s, double width, char *buf, size_t size)
{
    if (text_width(cr, s) <= width)
        return s;
    size_t n = strlen(s);
    if (n >= size - 4)
        n = size - 4;
    while (n > 0) {
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--; /* whole code points */
        snprintf(buf, size, "%.*s\xe2\x80\xa6", (int)n, s);
        if (text_width(cr, buf) <= width)
            return buf;
        n--;
    }
    return "\xe2\x80\xa6";
}

/* A crisp 1-pixel line lies on a half pixel. */
static double crisp(double v)
{
    return floor(v) + 0.5;
}

static void set_color(cairo_t *cr, int r, double alpha)
{
    const double *c = palette[(size_t)r % NCOLORS];
    cairo_set_source_rgba(cr, c[0], c[1], c[2], alpha);
}

/* How a curve of kind k is stroked; training curves are thinner where
 * evaluation curves are drawn over them ('behind'). */
static void set_stroke(cairo_t *cr, kind k, bool behind)
{
    static const double dash[] = {5, 3};
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    if (k == KIND_TRAIN) {
        cairo_set_line_width(cr, behind ? 1.2 : 1.6);
        cairo_set_dash(cr, dash, 2, 0);
    } else {
        cairo_set_line_width(cr, 2);
        cairo_set_dash(cr, NULL, 0, 0);
    }
}

/* Space above the first plot area: the title, and half a tick label. */
static double top_margin(const plot *p)
{
    return PAD + (p->title ? FONT_TITLE + 14 : 0) + 6;
}

/* Lays out the plot areas, the legend and the margins around them. */
static void layout(plot *p, cairo_t *cr, bool auto_height)
{
    set_font(cr, FONT_TICK, false);
    double tickw = 0;
    char buf[64];
    for (int i = 0; i < p->npanels; i++) {
        const panel *pn = &p->panels[i];
        for (int k = 0, n = intervals(pn->lo, pn->hi, pn->step); k <= n; k++) {
            tick_text(buf, sizeof buf, pn->lo + k * pn->step, pn->step);
            tickw = fmax(tickw, text_width(cr, buf));
        }
    }
    set_font(cr, FONT_LABEL, false);
    double textw = 0;
    for (int r = 0; r < p->nruns; r++)
        textw = fmax(textw, text_width(cr, p->runs[r].label));
    if (p->has_kind[KIND_EVAL])
        textw = fmax(textw, text_width(cr, "eval"));
    if (p->has_kind[KIND_TRAIN])
        textw = fmax(textw, text_width(cr, "train"));
    textw = fmin(textw, p->w * 0.3);
    p->legend_w = ceil(10 + SWATCH + 6 + textw + 10);
    p->legend_x = floor(p->w - PAD - p->legend_w);
    p->left = ceil(PAD + FONT_LABEL + 10 + tickw + TICK + 4);
    p->right = floor(p->legend_x - 16);
    p->gap = GAP;
    double top = top_margin(p), bottom = PAD + FONT_LABEL + 8 + FONT_TICK + TICK + 8;
    if (auto_height)
        p->h = ceil(top + bottom + PANEL_H * p->npanels + GAP * (p->npanels - 1));
    p->ph = floor((p->h - top - bottom - GAP * (p->npanels - 1)) / p->npanels);
    for (int i = 0; i < p->npanels; i++)
        p->panels[i].top = floor(top + i * (p->ph + GAP));
}

static double px_x(const plot *p, double x)
{
    return p->left + (x - p->xlo) / (p->xhi - p->xlo) * (p->right - p->left);
}

static double px_y(const plot *p, const panel *pn, double y)
{
    return pn->top + (pn->hi - y) / (pn->hi - pn->lo) * p->ph;
}

/* One curve: runs of finite points joined, a dot where a point stands alone
 * (and on every point of an evaluation curve of up to 60). */
static void draw_curve(cairo_t *cr, const plot *p, const panel *pn, const curve *c, bool behind)
{
    const fvm_series *s = c->s;
    if (c->spread) { /* the band, beneath: each run of finite points, up its top edge and back along its bottom */
        const fvm_series *sp = c->spread;
        set_color(cr, c->run, 0.18);
        for (size_t i = 0; i < s->n;) {
            size_t j = i;
            while (j < s->n && finite_point(s, j) && finite_point(sp, j))
                j++;
            if (j > i + 1) {
                for (size_t k = i; k < j; k++)
                    (k == i ? cairo_move_to : cairo_line_to)(cr, px_x(p, (double)s->rounds[k]),
                                                             px_y(p, pn, s->values[k] + sp->values[k]));
                for (size_t k = j; k-- > i;)
                    cairo_line_to(cr, px_x(p, (double)s->rounds[k]), px_y(p, pn, s->values[k] - sp->values[k]));
                cairo_close_path(cr);
                cairo_fill(cr);
            }
            i = j > i ? j : i + 1;
        }
    }
    set_color(cr, c->run, c->k == KIND_TRAIN && behind ? 0.6 : 1);
    set_stroke(cr, c->k, behind);
    bool open = false;
    for (size_t i = 0; i < s->n; i++) {
        if (!finite_point(s, i)) {
            open = false;
            continue;
        }
        double x = px_x(p, (double)s->rounds[i]), y = px_y(p, pn, s->values[i]);
        if (open) {
            cairo_line_to(cr, x, y);
        } else {
            cairo_move_to(cr, x, y);
            open = true;
        }
    }
    cairo_stroke(cr);
    bool dots = c->k == KIND_EVAL && s->n <= 60;
    for (size_t i = 0; i < s->n; i++) {
        if (!finite_point(s, i))
            continue;
        bool alone = (i == 0 || !finite_point(s, i - 1)) && (i + 1 == s->n || !finite_point(s, i + 1));
        if (!dots && !alone)
            continue;
        cairo_new_sub_path(cr);
        cairo_arc(cr, px_x(p, (double)s->rounds[i]), px_y(p, pn, s->values[i]), alone ? 3.5 : 2.5, 0, 2 * M_PI);
    }
    cairo_fill(cr);
}

static void draw_panel(cairo_t *cr, const plot *p, const panel *pn, bool bottom)
{
    double top = pn->top, bot = pn->top + p->ph;
    char buf[64];
    /* grid */
    cairo_set_line_width(cr, 1);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    int nx = intervals(p->xlo, p->xhi, p->xstep), ny = intervals(pn->lo, pn->hi, pn->step);
    for (int i = 1; i < nx; i++) {
        double x = crisp(px_x(p, p->xlo + i * p->xstep));
        cairo_move_to(cr, x, top);
        cairo_line_to(cr, x, bot);
    }
    for (int i = 1; i < ny; i++) {
        double y = crisp(px_y(p, pn, pn->lo + i * pn->step));
        cairo_move_to(cr, p->left, y);
        cairo_line_to(cr, p->right, y);
    }
    cairo_stroke(cr);
    /* curves: training beneath evaluation, and fainter when there is some */
    bool behind = false;
    for (int i = 0; i < pn->ncurves; i++)
        behind = behind || pn->curves[i].k != KIND_TRAIN;
    cairo_save(cr);
    cairo_rectangle(cr, p->left - 4, top - 4, p->right - p->left + 8, p->ph + 8);
    cairo_clip(cr);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < pn->ncurves; i++)
            if ((pn->curves[i].k == KIND_TRAIN) == (pass == 0))
                draw_curve(cr, p, pn, &pn->curves[i], behind);
    cairo_restore(cr);
    /* frame and ticks */
    cairo_set_line_width(cr, 1);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, crisp(p->left), crisp(top), floor(p->right) - floor(p->left), floor(bot) - floor(top));
    for (int i = 0; i <= nx; i++) {
        double x = crisp(px_x(p, p->xlo + i * p->xstep));
        cairo_move_to(cr, x, crisp(bot));
        cairo_line_to(cr, x, crisp(bot) + TICK);
    }
    for (int i = 0; i <= ny; i++) {
        double y = crisp(px_y(p, pn, pn->lo + i * pn->step));
        cairo_move_to(cr, crisp(p->left), y);
        cairo_line_to(cr, crisp(p->left) - TICK, y);
    }
    cairo_stroke(cr);
    /* tick labels and the axis names */
    set_font(cr, FONT_TICK, false);
    for (int i = 0; i <= ny; i++) {
        double v = pn->lo + i * pn->step;
        tick_text(buf, sizeof buf, v, pn->step);
        text_at(cr, p->left - TICK - 4, px_y(p, pn, v), buf, 1, 0.5);
    }
    if (bottom) {
        for (int i = 0; i <= nx; i++) {
            double v = p->xlo + i * p->xstep;
            tick_text(buf, sizeof buf, v, p->xstep);
            text_at(cr, px_x(p, v), bot + TICK + 4, buf, 0.5, 0);
        }
    }
    set_font(cr, FONT_LABEL, false);
    if (bottom)
        text_at(cr, (p->left + p->right) / 2, bot + TICK + 4 + FONT_TICK + 8, "round", 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, PAD, top + p->ph / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, pn->metric, 0.5, 0);
    cairo_restore(cr);
}

/* Runs by colour, then the line styles of the kinds drawn. */
static void draw_legend(cairo_t *cr, const plot *p)
{
    static const kind kinds[] = {KIND_EVAL, KIND_TRAIN};
    static const char *const names[] = {"eval", "train"};
    const double row = 18;
    int nstyles = p->has_kind[KIND_EVAL] + p->has_kind[KIND_TRAIN];
    double x = p->legend_x, y = p->panels[0].top;
    double h = 8 + row * (p->nruns + nstyles) + (nstyles ? 6 : 0) + 4;
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, crisp(x), crisp(y), floor(p->legend_w), floor(h));
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    cairo_stroke(cr);
    set_font(cr, FONT_LABEL, false);
    double textw = p->legend_w - (10 + SWATCH + 6 + 10);
    char buf[256];
    double cy = y + 8 + row / 2;
    for (int r = 0; r < p->nruns; r++, cy += row) {
        set_color(cr, r, 1);
        set_stroke(cr, KIND_EVAL, false);
        cairo_move_to(cr, x + 10, cy);
        cairo_line_to(cr, x + 10 + SWATCH, cy);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text_at(cr, x + 10 + SWATCH + 6, cy, fit_text(cr, p->runs[r].label, textw, buf, sizeof buf), 0, 0.5);
    }
    cy += 6;
    for (int i = 0; i < 2; i++) {
        if (!p->has_kind[kinds[i]])
            continue;
        cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
        set_stroke(cr, kinds[i], false);
        cairo_move_to(cr, x + 10, cy);
        cairo_line_to(cr, x + 10 + SWATCH, cy);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        text_at(cr, x + 10 + SWATCH + 6, cy, names[i], 0, 0.5);
        cy += row;
    }
}

static void draw(cairo_t *cr, const plot *p)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    for (int i = 0; i < p->npanels; i++)
        draw_panel(cr, p, &p->panels[i], i == p->npanels - 1);
    draw_legend(cr, p);
    if (p->title) {
        set_font(cr, FONT_TITLE, true);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        char buf[512];
        const char *t = fit_text(cr, p->title, p->w - 2 * PAD, buf, sizeof buf);
        double cx =
            fmin(fmax((p->left + p->right) / 2, PAD + text_width(cr, t) / 2), p->w - PAD - text_width(cr, t) / 2);
        text_at(cr, cx, PAD, t, 0.5, 0);
    }
}

/* ---- output -------------------------------------------------------------------- */

typedef struct buffer {
    unsigned char *p;
    size_t n, cap;
} buffer;

static cairo_status_t buffer_write(void *closure, const unsigned char *data, unsigned int len)
{
    buffer *b = closure;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + len)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return CAIRO_STATUS_WRITE_ERROR;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return CAIRO_STATUS_SUCCESS;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Lays out and draws p as an SVG or a PNG into b. *too_small when the
 * picture has no room for its panels (nothing drawn). */
static cairo_status_t picture(plot *p, bool svg, bool auto_height, buffer *b, bool *too_small)
{
    /* Text is measured on a scratch surface first; the layout fixes the height. */
    cairo_surface_t *scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
    cairo_t *cr = cairo_create(scratch);
    set_font_options(cr);
    layout(p, cr, auto_height);
    cairo_destroy(cr);
    cairo_surface_destroy(scratch);
    *too_small = p->ph < 60 || p->right - p->left < 120;
    if (*too_small)
        return CAIRO_STATUS_SUCCESS;
    cairo_surface_t *surface;
    if (svg) {
        surface = cairo_svg_surface_create_for_stream(buffer_write, b, p->w, p->h);
        cairo_svg_surface_restrict_to_version(surface, CAIRO_SVG_VERSION_1_1);
        cairo_svg_surface_set_document_unit(surface, CAIRO_SVG_UNIT_PX);
    } else {
        surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)p->w, (int)p->h);
    }
    cr = cairo_create(surface);
    set_font_options(cr);
    draw(cr, p);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && !svg)
        st = cairo_surface_write_to_png_stream(surface, buffer_write, b);
    cairo_surface_finish(surface); /* an SVG surface writes its document here */
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    return st;
}

/* Draws p into out (.svg or .png), replacing it atomically. */
static int render(plot *p, const char *out, bool auto_height)
{
    buffer b = {0};
    bool too_small;
    cairo_status_t st = picture(p, ends_with(out, ".svg"), auto_height, &b, &too_small);
    /* Give back the font caches cairo and fontconfig keep for the process
     * (no cairo object is alive now), so that leak checkers see a clean exit. */
    cairo_debug_reset_static_data();
    FcFini();
    int rc;
    if (too_small) {
        fprintf(stderr, "fedvm: --size %gx%g is too small for %d panel%s and the legend\n", p->w, p->h, p->npanels,
                p->npanels == 1 ? "" : "s");
        rc = EXIT_USAGE;
    } else if (st != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "%s: cannot draw the picture: %s\n", out, cairo_status_to_string(st));
        rc = EXIT_INVALID;
    } else {
        rc = cli_write_atomic(out, (const char *)b.p, b.n);
    }
    free(b.p);
    return rc;
}

/* ---- the command --------------------------------------------------------------- */

static bool parse_size(const char *s, double *w, double *h)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X'))
        return false;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || *end || a < 300 || a > 10000 || b < 150 || b > 10000)
        return false;
    *w = (double)a;
    *h = (double)b;
    return true;
}

static void warn_oddities(const fvm_metrics *m)
{
    if (m->partial_line)
        fprintf(stderr, "%s:%d: note: an incomplete last line (a run stopped while writing it) is left out\n", m->file,
                m->partial_line);
    if (m->restart_line)
        fprintf(stderr,
                "%s:%d: note: the rounds start again here (runs appended to one file); %zu earlier line%s of "
                "the same rounds %s left out\n",
                m->file, m->restart_line, m->replaced, m->replaced == 1 ? "" : "s", m->replaced == 1 ? "is" : "are");
}

/* ---- a sweep ------------------------------------------------------------------ */

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The value of 'round' in series s, or -1 when s has no point there (rounds increase). */
static ssize_t point_at(const fvm_series *s, int64_t round)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->rounds[mid] < round)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->rounds[lo] == round ? (ssize_t)lo : -1;
}

/* Puts v into the line object at its dotted path ("train.loss"). */
static bool put_path(fvm_arena *a, fvm_doc *line, const char *path, double v)
{
    char key[256];
    const char *dot;
    while ((dot = strchr(path, '.'))) {
        snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
        fvm_doc *next = fvm_doc_get(line, key);
        if (!next && (!(next = fvm_doc_new(a, FVM_DOC_OBJECT)) || fvm_doc_set(a, line, key, next)))
            return false;
        if (next->kind != FVM_DOC_OBJECT)
            return true; /* "train" and "train.loss" both: the first one kept */
        line = next;
        path = dot + 1;
    }
    return !fvm_doc_set(a, line, path, fvm_doc_real(a, v));
}

/* The mean (which 0) or the sample standard deviation (which 1) over the n
 * files of each series of the first, at the rounds that all of them have,
 * as the text of a metrics file, then read back into *out. */
static fvm_status combine_runs(fvm_metrics *const *ms, int n, int which, const char *name, fvm_metrics **out)
{
    fvm_arena a = {0};
    const fvm_metrics *m0 = ms[0];
    /* the rounds of any series, in order, once each */
    size_t total = 0;
    for (size_t i = 0; i < m0->nseries; i++)
        total += m0->series[i].n;
    int64_t *rounds = malloc((total ? total : 1) * sizeof *rounds);
    if (!rounds)
        return FVM_ERR_NOMEM;
    size_t nr = 0;
    for (size_t i = 0; i < m0->nseries; i++)
        for (size_t j = 0; j < m0->series[i].n; j++)
            rounds[nr++] = m0->series[i].rounds[j];
    qsort(rounds, nr, sizeof *rounds, by_value);
    size_t uniq = 0;
    for (size_t i = 0; i < nr; i++)
        if (!uniq || rounds[uniq - 1] != rounds[i])
            rounds[uniq++] = rounds[i];
    nr = uniq;
    size_t len = 0, cap = 0;
    char *text = NULL;
    fvm_status s = FVM_OK;
    for (size_t ri = 0; ri < nr && !s; ri++) {
        fvm_doc *line = fvm_doc_new(&a, FVM_DOC_OBJECT);
        if (!line || fvm_doc_set(&a, line, "round", fvm_doc_int(&a, rounds[ri]))) {
            s = FVM_ERR_NOMEM;
            break;
        }
        line->flow = true;
        bool any = false;
        for (size_t i = 0; i < m0->nseries && !s; i++) {
            double sum = 0, sq = 0;
            int have = 0;
            for (int f = 0; f < n; f++) {
                const fvm_series *sr = fvm_metrics_get(ms[f], m0->series[i].name);
                ssize_t at = sr ? point_at(sr, rounds[ri]) : -1;
                if (at < 0)
                    break;
                sum += sr->values[at];
                have++;
            }
            if (have < n)
                continue; /* not in every run */
            double mean = sum / n;
            for (int f = 0; f < n; f++) {
                const fvm_series *sr = fvm_metrics_get(ms[f], m0->series[i].name);
                double dv = sr->values[point_at(sr, rounds[ri])] - mean;
                sq += dv * dv;
            }
            double v = which == 0 ? mean : n > 1 ? sqrt(sq / (n - 1)) : 0;
            if (!put_path(&a, line, m0->series[i].name, v))
                s = FVM_ERR_NOMEM;
            any = true;
        }
        char *l = NULL;
        size_t ll = 0;
        fvm_diag d = {0};
        if (!s && any && !(s = fvm_json_write(line, &l, &ll, &d))) {
            if (len + ll + 1 > cap) {
                char *g = realloc(text, cap = 2 * (len + ll + 1));
                if (!g)
                    s = FVM_ERR_NOMEM;
                else
                    text = g;
            }
            if (!s) {
                memcpy(text + len, l, ll);
                len += ll;
            }
        }
        free(l);
        fvm_diag_clear(&d);
    }
    free(rounds);
    fvm_arena_free(&a);
    if (!s) {
        fvm_diag d = {0};
        s = fvm_metrics_parse(name, text ? text : "", len, out, &d);
        cli_print_errors(&d);
        fvm_diag_clear(&d);
    }
    free(text);
    return s;
}

/* The runs of a sweep's index (fedvm run --grid/--seeds): one per
 * configuration, its mean and spread over its seeds, labelled by its values. */
static int load_sweep(plot *p, const char *index, fvm_arena *a)
{
    fvm_diag d = {0};
    char *text = NULL;
    size_t len = 0;
    fvm_doc *root = NULL;
    int rc = EXIT_INVALID;
    fvm_metrics **ms = NULL;
    if (fvm_read_file(index, &text, &len, &d) || fvm_json_parse(a, &(fvm_doc_src){index, text, len}, &root, &d)) {
        cli_print_errors(&d);
        goto done;
    }
    const fvm_doc *runs = fvm_doc_get(root, "runs");
    if (root->kind != FVM_DOC_OBJECT || !runs || runs->kind != FVM_DOC_ARRAY || !runs->u.coll.n) {
        fprintf(stderr, "fedvm: %s: not a sweep's index (an object with \"runs\", as fedvm run --grid writes)\n",
                index);
        goto done;
    }
    size_t n = runs->u.coll.n;
    const char *slash = strrchr(index, '/');
    int dirlen = slash ? (int)(slash - index) : 1;
    const char *dir = slash ? index : ".";
    const char **keys = fvm_arena_array(a, n, sizeof *keys);
    ms = calloc(n, sizeof *ms);
    p->runs = calloc(n, sizeof *p->runs);
    if (!keys || !ms || !p->runs)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        const fvm_doc *r = runs->u.coll.items[i], *file = r->kind == FVM_DOC_OBJECT ? fvm_doc_get(r, "file") : NULL,
                      *set = r->kind == FVM_DOC_OBJECT ? fvm_doc_get(r, "set") : NULL;
        if (!file || file->kind != FVM_DOC_STRING || !set || set->kind != FVM_DOC_OBJECT ||
            strchr(file->u.str.s, '/')) {
            fprintf(stderr, "fedvm: %s: /runs/%zu: expected {\"file\": a file name, \"set\": {...}}\n", index, i);
            goto done;
        }
        char *k = NULL;
        size_t kl = 0;
        if (fvm_json_write(set, &k, &kl, &d) || !(keys[i] = fvm_arena_strndup(a, k, kl))) {
            free(k);
            cli_print_errors(&d);
            goto done;
        }
        free(k);
        const char *path = fvm_arena_printf(a, "%.*s/%s", dirlen, dir, file->u.str.s);
        if (!path || fvm_metrics_read(path, &ms[i], &d)) {
            cli_print_errors(&d);
            goto done;
        }
    }
    /* each configuration in order of its first run */
    bool *taken = fvm_arena_array(a, n, sizeof *taken);
    fvm_metrics **group = fvm_arena_array(a, n, sizeof *group);
    if (!taken || !group)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        if (taken[i])
            continue;
        int g = 0;
        for (size_t j = i; j < n; j++)
            if (!taken[j] && !strcmp(keys[j], keys[i])) {
                taken[j] = true;
                group[g++] = ms[j];
            }
        /* the label: the values, as name=value, and the number of seeds */
        const fvm_doc *set = fvm_doc_get(runs->u.coll.items[i], "set");
        char label[256] = "";
        size_t ll = 0;
        for (size_t k = 0; k < set->u.coll.n && ll < sizeof label; k++) {
            char *v = NULL;
            size_t vl = 0;
            fvm_diag vd = {0};
            if (!fvm_json_write(set->u.coll.items[k], &v, &vl, &vd))
                ll += (size_t)snprintf(label + ll, sizeof label - ll, "%s%s=%.*s", k ? ", " : "",
                                       set->u.coll.keys[k]->u.str.s, (int)(vl ? vl - 1 : 0), v);
            free(v);
            fvm_diag_clear(&vd);
        }
        if (ll < sizeof label)
            snprintf(label + ll, sizeof label - ll, "%s(%d seed%s)", ll ? " " : "", g, g == 1 ? "" : "s");
        run *r = &p->runs[p->nruns];
        r->file = index;
        if (!(r->label = fvm_arena_strdup(a, label)))
            goto nomem;
        if (combine_runs(group, g, 0, index, &r->m) || combine_runs(group, g, 1, index, &r->spread)) {
            fprintf(stderr, "fedvm: %s: cannot combine the runs of %s\n", index, label);
            fvm_metrics_free(r->m);
            fvm_metrics_free(r->spread);
            goto done;
        }
        p->nruns++;
    }
    rc = 0;
    goto done;
nomem:
    fprintf(stderr, "fedvm: out of memory\n");
done:
    for (size_t i = 0; ms && runs && i < runs->u.coll.n; i++)
        fvm_metrics_free(ms[i]);
    free(ms);
    free(text);
    fvm_diag_clear(&d);
    return rc;
}

int fvm_cmd_plot(int argc, char **argv)
{
    const char *out = NULL, *title = NULL;
    const char **files = calloc((size_t)argc + 1, sizeof *files), **labels = calloc((size_t)argc + 1, sizeof *labels),
               **metrics = calloc((size_t)argc + 2, sizeof *metrics);
    int nfiles = 0, nlabels = 0, nmetrics = 0, rc = EXIT_USAGE;
    double w = 800, h = 0;
    plot p = {0};
    fvm_arena sweep_arena = {0}; /* a sweep's labels */
    char(*label_bufs)[256] = NULL;
    if (!files || !labels || !metrics) {
        fprintf(stderr, "fedvm: out of memory\n");
        rc = EXIT_INVALID;
        goto done;
    }
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(fvm_usage_plot, stdout);
            rc = 0;
            goto done;
        } else if ((v = cli_opt(argc, argv, &i, "-o"))) {
            if (!*v) {
                rc = cli_usage_error(fvm_usage_plot, "%s", "-o needs a file name ending in .svg or .png");
                goto done;
            }
            out = v;
        } else if ((v = cli_opt(argc, argv, &i, "--label"))) {
            labels[nlabels++] = v;
        } else if ((v = cli_opt(argc, argv, &i, "--metric"))) {
            if (!*v) {
                rc = cli_usage_error(fvm_usage_plot, "%s", "--metric needs a NAME");
                goto done;
            }
            metrics[nmetrics++] = v;
        } else if ((v = cli_opt(argc, argv, &i, "--title"))) {
            title = *v ? v : NULL;
        } else if ((v = cli_opt(argc, argv, &i, "--size"))) {
            if (!parse_size(v, &w, &h)) {
                rc = cli_usage_error(fvm_usage_plot, "--size must be WxH, from 300x150 to 10000x10000, found '%s'", v);
                goto done;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = cli_unknown_option(fvm_usage_plot, argv[i]);
            goto done;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    if (!nfiles) {
        rc = cli_usage_error(fvm_usage_plot, "%s", "plot needs at least one metrics FILE");
        goto done;
    }
    if (!out) {
        rc = cli_usage_error(fvm_usage_plot, "%s", "plot needs -o OUT.svg or -o OUT.png");
        goto done;
    }
    if (!ends_with(out, ".svg") && !ends_with(out, ".png")) {
        rc = cli_usage_error(fvm_usage_plot, "-o: the picture's name must end in .svg or .png, found '%s'", out);
        goto done;
    }
    if (nlabels > nfiles) {
        fprintf(stderr, "fedvm: %d --label for %d file%s\n\n%s", nlabels, nfiles, nfiles == 1 ? "" : "s",
                fvm_usage_plot);
        goto done;
    }
    bool explicit = nmetrics > 0;
    if (!explicit) {
        metrics[nmetrics++] = "loss";
        metrics[nmetrics++] = "accuracy";
    }
    rc = EXIT_INVALID;
    p.runs = calloc((size_t)nfiles, sizeof *p.runs);
    label_bufs = calloc((size_t)nfiles, sizeof *label_bufs);
    if (!p.runs || !label_bufs) {
        fprintf(stderr, "fedvm: out of memory\n");
        goto done;
    }
    p.title = title;
    p.w = w;
    p.h = h;
    bool sweep = nfiles == 1 && ends_with(files[0], ".json"); /* a sweep's index */
    if (sweep) {
        free(p.runs);
        p.runs = NULL;
        if (nlabels) {
            rc = cli_usage_error(fvm_usage_plot, "%s",
                                 "--label is for metrics files; a sweep's curves are named by "
                                 "their values");
            goto done;
        }
        if (load_sweep(&p, files[0], &sweep_arena))
            goto done;
    }
    for (int i = 0; !sweep && i < nfiles; i++) {
        fvm_diag d = {0};
        p.runs[i].file = files[i];
        p.runs[i].label = i < nlabels ? labels[i] : NULL;
        fvm_status s = fvm_metrics_read(files[i], &p.runs[i].m, &d);
        cli_print_errors(&d);
        fvm_diag_clear(&d);
        if (s)
            goto done;
        p.nruns++;
        warn_oddities(p.runs[i].m);
    }
    default_labels(&p, label_bufs);
    if (build_panels(&p, metrics, nmetrics, explicit))
        goto done;
    if (!p.npanels) {
        fprintf(stderr, "fedvm: no file has a loss or an accuracy; choose what to draw with --metric NAME (%s: ",
                nfiles == 1 ? "the file has" : "the files have");
        print_series_names(&p);
        fprintf(stderr, ")\n");
        goto done;
    }
    rc = render(&p, out, h == 0);
done:
    for (int i = 0; i < p.npanels; i++)
        free(p.panels[i].curves);
    free(p.panels);
    for (int i = 0; i < p.nruns; i++) {
        fvm_metrics_free(p.runs[i].m);
        fvm_metrics_free(p.runs[i].spread);
    }
    free(p.runs);
    fvm_arena_free(&sweep_arena);
    free(label_bufs);
    free(files);
    free(labels);
    free(metrics);
    return rc;
}
