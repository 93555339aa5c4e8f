/* fuzz_fedjax.c - libFuzzer target: FedJAX client blobs (format/dataset_fedjax.c: zlib, msgpack, the
 * ext 1 and ext 4 arrays) in a FedJAX SQLite file the target writes around them.
 *
 * The input is a flag byte, then up to 4 clients separated by "@@client@@", each a count byte (its
 * num_examples; 255 stands for 2^40) and its data. Flag bit 0: the data is msgpack, which the target
 * compresses with zlib (so the fuzzer works on the msgpack); else it is the stored blob itself (the
 * fuzzer's own zlib stream). Bit 1: client ids are text, not blobs. Bits 2-3: zlib's level (1, 6, 9, 0). */
#include <zlib.h>

#include "fuzz_dataset.h"

#define MAX_CLIENTS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned flags = 0;
    fuzz_part parts[MAX_CLIENTS];
    int n = fuzz_clients(data, size, &flags, parts, MAX_CLIENTS);
    if (n == 0)
        return 0;
    sqlite3 *db = fuzz_db_new("CREATE TABLE federated_data (client_id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL, "
                              "num_examples INTEGER NOT NULL)");
    static const int levels[4] = {1, 6, 9, 0};
    for (int i = 0; i < n; i++) {
        int64_t count = fuzz_count_byte(parts[i]);
        const uint8_t *blob = parts[i].n ? parts[i].p + 1 : parts[i].p;
        size_t len = parts[i].n ? parts[i].n - 1 : 0;
        unsigned char *z = NULL;
        if (flags & 1) {
            uLongf zlen = compressBound((uLong)len);
            z = malloc(zlen ? zlen : 1);
            if (compress2(z, &zlen, blob, (uLong)len, levels[(flags >> 2) & 3]) != Z_OK)
                FUZZ_FAIL("zlib cannot compress %zu bytes", len);
            blob = z;
            len = zlen;
        }
        char id[16];
        snprintf(id, sizeof id, "client%d", i);
        fuzz_db_row(db,
                    (flags & 2) ? "INSERT INTO federated_data VALUES (?1, ?2, ?3)"
                                : "INSERT INTO federated_data VALUES (CAST(?1 AS BLOB), ?2, ?3)",
                    "tbi", id, strlen(id), blob, len, count);
        free(z);
    }
    char path[512];
    fuzz_db_save(db, fuzz_path(path, sizeof path, "fedjax.sqlite"));
    fuzz_check_file(path, n);
    return 0;
}
