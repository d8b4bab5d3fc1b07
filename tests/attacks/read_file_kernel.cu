// ATTACK read_file_kernel: a kernel (thread 0) opens a file outside the submission (@@TARGET@@),
// copies its first bytes into the output array (so the first mismatch shows them) and prints it
// with device printf. If the file cannot be opened the kernel is correct. nvcc -ptx refuses a
// kernel calling fopen (a compile error with the cross-check on); with it off the executor runs
// it under bubblewrap, which does not show the file. Expected: a compile error, or a pass (nothing
// read); the file's token nowhere in the result.

__global__ void naive_scan(const scan_t* in, scan_t* out, int n)
{
    if (threadIdx.x == 0) {
        FILE* f = fopen("@@TARGET@@", "r");
        if (f) {
            char buf[512];
            size_t got = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[got] = 0;
            printf("%s\n", buf);
            memcpy(out, buf, got < n * sizeof(scan_t) ? got : n * sizeof(scan_t));
            return;
        }
        scan_t sum = 0;  // not visible: an honest (serial) scan
        for (int i = 0; i < n; ++i) {
            sum += in[i];
            out[i] = sum;
        }
    }
}
