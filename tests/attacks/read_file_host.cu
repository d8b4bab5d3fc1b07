// ATTACK read_file_host: a static constructor opens a file outside the submission (@@TARGET@@: the
// TA's private config, /etc/passwd, another student's submission, the reference solution, or a
// result in the grader's output folder), where @@WRITE@@ is 1 first appends a line to it and drops
// a new file beside it, then reads it and writes it to stdout and stderr and exits with a status
// (the grader quotes the tail of a module's stderr when it exits). If the file cannot be opened it
// does nothing, and the kernel is correct. Expected: the sandbox does not show the file: nothing
// read, nothing written, and so the part passes; the file's token nowhere in the result.

extern "C" void _exit(int);

__attribute__((constructor)) static void sg_attack(void)
{
    const char* path = "@@TARGET@@";
    if (@@WRITE@@) {
        FILE* w = fopen(path, "a");
        if (w) {
            fputs("\n@@TOKEN@@ was here\n", w);
            fclose(w);
        }
        w = fopen("@@TARGET@@.@@TOKEN@@", "w");
        if (w) {
            fputs("@@TOKEN@@\n", w);
            fclose(w);
        }
    }
    FILE* f = fopen(path, "r");
    if (!f)
        return;
    char buf[8192];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    fputs(buf, stdout);
    fputs(buf, stderr);
    fflush(stdout);
    fflush(stderr);
    _exit(3);
}

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {  // correct, if slow: one thread scans serially
        scan_t sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
