/* inspect_gguf.c - GGUF additions to `pagein inspect` through the hooks of
 * cli/inspect.h: version, alignment and byte order in the summary and the
 * JSON, the raw ggml type and ne of each tensor, and metadata arrays as
 * typed JSON arrays (long ones cut to their first elements and marked with a
 * {"...truncated": {...}} object; --full shows 1024, --full=all every one). Uses only <pagein.h>. */
#include "inspect.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define TEXT_SHOWN 8  /* array elements shown in text output without --full */
#define JSON_SHOWN 64 /* ... and in JSON */
#define FULL_SHOWN 1024 /* with --full (--full=all: every element) */

static void gguf_summary(const pagein_file *f, FILE *out) {
    pagein_file_info in;
    pagein_file_get_info(f, &in);
    fprintf(out, "gguf:        version %u, alignment %u, data start %" PRIu64 ", %s\n", in.version, in.alignment,
            in.data_start, in.big_endian ? "big-endian (tensor data not converted)" : "little-endian");
}

static void gguf_json(const pagein_file *f, FILE *out) {
    pagein_file_info in;
    pagein_file_get_info(f, &in);
    fprintf(out, ",\"version\":%u,\"alignment\":%u,\"big_endian\":%s", in.version, in.alignment,
            in.big_endian ? "true" : "false");
}

static void gguf_tensor_json(const pagein_file *f, const pagein_tensor *t, FILE *out) {
    (void)f;
    uint64_t ne[4];
    uint32_t nd = pagein_tensor_ggml_ne(t, ne);
    const pagein_dtype_info *di = pagein_dtype_get(t->dtype);
    fprintf(out, ",\"ggml_type\":%d,\"ne\":[", di ? di->gguf_id : -1);
    for (uint32_t d = 0; d < nd && d < 4; d++) fprintf(out, "%s%" PRIu64, d ? "," : "", ne[d]);
    fputc(']', out);
}

static void print_double(FILE *out, double v, int f32) {
    if (!isfinite(v)) fputs("null", out);
    else fprintf(out, f32 ? "%.9g" : "%.17g", v);
}

static void text_str(FILE *out, const char *s, size_t n) {
    fputc('"', out);
    inspect_escaped(out, s, n < 80 ? n : 80);
    if (n > 80) fputs("...", out);
    fputc('"', out);
}

static void render_array(const pagein_file *f, const pagein_meta *m, FILE *out, int depth) {
    uint64_t shown = m->count;
    if (inspect_full < 2) {
        uint64_t lim = inspect_full ? FULL_SHOWN : inspect_text ? TEXT_SHOWN : JSON_SHOWN;
        if (shown > lim) shown = lim;
    }
    if (inspect_text) fprintf(out, "%s[%" PRIu64 "] ", pagein_meta_type_name(m->elem_type), m->count);
    fputc('[', out);
    for (uint64_t i = 0; i < shown; i++) {
        if (i) fputs(inspect_text ? ", " : ",", out);
        uint64_t u;
        int64_t s;
        double d;
        const char *str;
        size_t len;
        pagein_meta sub;
        switch (m->elem_type) {
        case PAGEIN_META_STRING:
            if (pagein_meta_array_str(f, m, i, &str, &len) == 0) {
                if (inspect_text) text_str(out, str, len);
                else cli_json_str(out, str, len);
            } else {
                fputs("null", out);
            }
            break;
        case PAGEIN_META_F32: case PAGEIN_META_F64:
            if (pagein_meta_array_f64(f, m, i, &d) == 0) print_double(out, d, m->elem_type == PAGEIN_META_F32);
            else fputs("null", out);
            break;
        case PAGEIN_META_BOOL:
            fputs(pagein_meta_array_u64(f, m, i, &u) == 0 && u ? "true" : "false", out);
            break;
        case PAGEIN_META_I8: case PAGEIN_META_I16: case PAGEIN_META_I32: case PAGEIN_META_I64:
            if (pagein_meta_array_i64(f, m, i, &s) == 0) fprintf(out, "%" PRId64, s);
            else fputs("null", out);
            break;
        case PAGEIN_META_ARRAY:
            if (depth < 8 && pagein_meta_array_at(f, m, i, &sub) == 0) render_array(f, &sub, out, depth + 1);
            else fputs("null", out);
            break;
        default:
            if (pagein_meta_array_u64(f, m, i, &u) == 0) fprintf(out, "%" PRIu64, u);
            else fputs("null", out);
            break;
        }
    }
    if (shown < m->count) {
        if (inspect_text)
            fprintf(out, "%s... %" PRIu64 " more", shown ? ", " : "", m->count - shown);
        else
            fprintf(out, "%s{\"...truncated\":{\"count\":%" PRIu64 ",\"shown\":%" PRIu64 "}}", shown ? "," : "",
                    m->count, shown);
    }
    fputc(']', out);
}

static int gguf_meta_json(const pagein_file *f, const pagein_meta *m, FILE *out) {
    switch (m->type) {
    case PAGEIN_META_ARRAY: render_array(f, m, out, 0); return 1;
    case PAGEIN_META_F32: print_double(out, m->v.f, 1); return 1;
    default: return 0;
    }
}

INSPECT_HOOK(gguf, PAGEIN_FORMAT_GGUF, "gguf", gguf_summary, gguf_json, gguf_tensor_json, gguf_meta_json)
