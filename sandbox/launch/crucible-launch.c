/* Sets one sandboxed command's process up, then execs it: what a Python function between
 * fork and exec would do, without making Python fork its whole interpreter.
 *
 *   crucible-launch PARENT [--cgroup=PROCS_FILE]... [--rlimit=RESOURCE:VALUE]... -- ARGV...
 *
 * In order: die with the parent (SIGKILL), and exit at once if the parent died before that
 * was set (the signal would never come); join each cgroup; set each resource limit, soft and
 * hard; exec ARGV. Exits 137 when the parent is gone, 126 when a step fails (with the reason
 * on stderr), 127 when ARGV cannot be executed. Built by sandbox/launcher.py.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

static int fail(const char *what, const char *arg) {
    fprintf(stderr, "crucible: %s %s: %s\n", what, arg, strerror(errno));
    return 126;
}

static int join(const char *procs) {
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t written = write(fd, "0", 1);
    int saved = errno;
    close(fd);
    errno = saved;
    return written == 1 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: crucible-launch PARENT [--cgroup=F]... [--rlimit=R:V]... -- ARGV...\n");
        return 126;
    }
    pid_t parent = (pid_t)strtol(argv[1], NULL, 10);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return fail("cannot set the death signal", "");
    if (getppid() != parent) return 137;
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--cgroup=", 9) == 0) {
            if (join(arg + 9) != 0) return fail("cannot join cgroup", arg + 9);
        } else if (strncmp(arg, "--rlimit=", 9) == 0) {
            char *end;
            long resource = strtol(arg + 9, &end, 10);
            if (*end != ':') { errno = EINVAL; return fail("bad limit", arg); }
            struct rlimit limit;
            limit.rlim_cur = limit.rlim_max = (rlim_t)strtoull(end + 1, NULL, 10);
            if (setrlimit((int)resource, &limit) != 0) return fail("cannot set limit", arg);
        } else {
            errno = EINVAL;
            return fail("unknown option", arg);
        }
    }
    if (i + 1 >= argc) { errno = EINVAL; return fail("no command after", "--"); }
    execvp(argv[i + 1], &argv[i + 1]);
    fprintf(stderr, "crucible: cannot execute %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
