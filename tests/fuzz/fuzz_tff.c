/* fuzz_tff.c - libFuzzer target: TFF tf.train.Example protos (format/dataset_tff.c, protobuf-c) in a TFF
 * SQLite file the target writes around them.
 *
 * The input is a flag byte, then up to 4 clients separated by "@@client@@", each up to 16 serialized
 * examples separated by "@@example@@". Flag bit 0: each client's part starts with a count byte, its
 * num_examples in client_metadata (255 stands for 2^40), instead of the number of its examples.
 * Bit 1: client ids are blobs, not text. Bit 2: the clients are listed in client_metadata in reverse. */
#include "fuzz_dataset.h"

#define MAX_CLIENTS 4
#define MAX_EXAMPLES 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned flags = 0;
    fuzz_part clients[MAX_CLIENTS];
    int n = fuzz_clients(data, size, &flags, clients, MAX_CLIENTS);
    if (n == 0)
        return 0;
    sqlite3 *db = fuzz_db_new("CREATE TABLE examples (split_name TEXT NOT NULL, client_id TEXT NOT NULL, "
                              "serialized_example_proto BLOB NOT NULL);"
                              "CREATE TABLE client_metadata (client_id TEXT NOT NULL, split_name TEXT NOT NULL, "
                              "num_examples INTEGER NOT NULL)");
    const char *ins_ex = (flags & 2) ? "INSERT INTO examples VALUES ('train', CAST(?1 AS BLOB), ?2)"
                                     : "INSERT INTO examples VALUES ('train', ?1, ?2)";
    const char *ins_meta = (flags & 2) ? "INSERT INTO client_metadata VALUES (CAST(?1 AS BLOB), 'train', ?2)"
                                       : "INSERT INTO client_metadata VALUES (?1, 'train', ?2)";
    int64_t counts[MAX_CLIENTS];
    for (int i = 0; i < n; i++) {
        fuzz_part c = clients[i];
        int64_t count = -1;
        if (flags & 1) {
            count = fuzz_count_byte(c);
            c.p += c.n ? 1 : 0;
            c.n -= c.n ? 1 : 0;
        }
        char id[16];
        snprintf(id, sizeof id, "client%d", i);
        fuzz_part ex[MAX_EXAMPLES];
        int m = c.n ? fuzz_split(c.p, c.n, "@@example@@", ex, MAX_EXAMPLES) : 0;
        for (int e = 0; e < m; e++)
            fuzz_db_row(db, ins_ex, "tb", id, strlen(id), ex[e].p, ex[e].n);
        counts[i] = count >= 0 ? count : m;
    }
    for (int k = 0; k < n; k++) {
        int i = (flags & 4) ? n - 1 - k : k;
        char id[16];
        snprintf(id, sizeof id, "client%d", i);
        fuzz_db_row(db, ins_meta, "ti", id, strlen(id), counts[i]);
    }
    char path[512];
    fuzz_db_save(db, fuzz_path(path, sizeof path, "tff.sqlite"));
    fuzz_check_file(path, n);
    return 0;
}
