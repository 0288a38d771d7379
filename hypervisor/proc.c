// SPDX-License-Identifier: GPL-2.0-only
#include "proc.h"
#include "clock.h"
#include "cpulist.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

void rdb_hv_proc_init(struct rdb_hv_proc *p)
{
	p->pid = -1;
	p->pidfd = -1;
}

int rdb_hv_adopt(pid_t pid, struct rdb_hv_proc *out)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		return -errno;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	out->pid = pid;
	out->pidfd = fd;
	return 0;
}

uint64_t rdb_hv_proc_start(pid_t pid)
{
	char path[64], buf[1024], *rp, *tok, *save = NULL;
	unsigned long long start = 0;
	FILE *f;
	size_t n;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after the command's ")": field 3 (state) ... field 22 (starttime) */
	rp = strrchr(buf, ')');
	if (!rp)
		return 0;
	tok = strtok_r(rp + 1, " ", &save);
	if (!tok || *tok == 'Z' || *tok == 'X')
		return 0;
	for (int field = 4; (tok = strtok_r(NULL, " ", &save)); field++)
		if (field == 22) {
			start = strtoull(tok, NULL, 10);
			break;
		}
	return start;
}

static int place_thread(pid_t tid, void *opaque)
{
	const cpu_set_t *cpus = opaque;

	if (sched_setaffinity(tid, sizeof(*cpus), cpus) == 0)
		return 0;
	return errno == ESRCH ? 1 : -errno;	/* 1: a thread that just left */
}

int rdb_hv_place(pid_t pid, const cpu_set_t *cpus)
{
	return rdb_cpulist_each_thread(pid, place_thread, (void *)cpus);
}

/* An adopted process: 1 once it has exited (the pidfd closed), else 0. */
static int adopted_gone(struct rdb_hv_proc *p, int timeout_ms)
{
	struct pollfd pf = { .fd = p->pidfd, .events = POLLIN };

	if (poll(&pf, 1, timeout_ms) <= 0)
		return 0;
	close(p->pidfd);
	p->pidfd = -1;
	p->pid = -1;
	return 1;
}

/* Between fork and exec: async-signal-safe calls only (the daemon has
 * threads).  Reports its errno on the CLOEXEC pipe and exits. */
static void child(char *const *argv, const char *logpath,
		  const cpu_set_t *cpus, int err_fd)
{
	sigset_t none;
	int err, fd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	if (cpus && sched_setaffinity(0, sizeof(*cpus), cpus) < 0)
		goto fail;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, 0) < 0)
		goto fail;
	fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		goto fail;
	execvp(argv[0], argv);
fail:
	err = errno;
	(void)!write(err_fd, &err, sizeof(err));
	_exit(127);
}

int rdb_hv_spawn(char *const *argv, const char *logpath,
		   const cpu_set_t *cpus, struct rdb_hv_proc *out)
{
	int err_pipe[2], err = 0;
	ssize_t r;
	pid_t pid;

	if (!argv || !argv[0] || !logpath)
		return -EINVAL;
	if (pipe2(err_pipe, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(err_pipe[0]);
		close(err_pipe[1]);
		return err;
	}
	if (pid == 0)
		child(argv, logpath, cpus, err_pipe[1]);
	close(err_pipe[1]);
	/* The exec succeeded iff the CLOEXEC pipe closes without a word. */
	do
		r = read(err_pipe[0], &err, sizeof(err));
	while (r < 0 && errno == EINTR);
	close(err_pipe[0]);
	if (r == (ssize_t)sizeof(err)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return err ? -err : -EIO;
	}
	out->pid = pid;
	out->pidfd = -1;	/* our child: waitpid */
	return 0;
}

int rdb_hv_poll_exit(struct rdb_hv_proc *p, int *status_out)
{
	int status;
	pid_t r;

	if (p->pid <= 0)
		return -ECHILD;
	if (p->pidfd >= 0) {
		if (!adopted_gone(p, 0))
			return 0;
		if (status_out)
			*status_out = 0;
		return 1;
	}
	r = waitpid(p->pid, &status, WNOHANG);
	if (r == 0 || (r < 0 && errno == EINTR))
		return 0;
	/* r < 0 (ECHILD): someone else reaped it; it is gone either way. */
	p->pid = -1;
	if (status_out)
		*status_out = r > 0 ? status : 0;
	return 1;
}

int rdb_hv_kill(struct rdb_hv_proc *p, uint64_t deadline_ns)
{
	if (p->pid <= 0)
		return 0;
	kill(p->pid, SIGTERM);
	for (;;) {
		if (rdb_hv_poll_exit(p, NULL) == 1)
			return 0;
		if (rdb_now_ns() >= deadline_ns)
			break;
		usleep(5000);
	}
	/* Past the deadline: SIGKILL cannot be refused, the reap is quick. */
	kill(p->pid, SIGKILL);
	if (p->pidfd >= 0) {
		/* its parent reaps it; a second is plenty for the kernel */
		if (!adopted_gone(p, 1000)) {
			close(p->pidfd);
			p->pidfd = -1;
			p->pid = -1;
			return -EBUSY;
		}
		return -ETIMEDOUT;
	}
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
	p->pid = -1;
	return -ETIMEDOUT;
}

int rdb_hv_run(char *const *argv, uint64_t deadline_ns, char **out,
	       int *code_out)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int pipefd[2], st = 0, rc = 0;
	pid_t pid;

	if (code_out)
		*code_out = 0;
	if (out)
		*out = NULL;
	if (!buf || pipe2(pipefd, O_CLOEXEC) < 0) {
		free(buf);
		return -ENOMEM;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		free(buf);
		return rc;
	}
	if (pid == 0) {
		/* the daemon's blocked signals (SIGTERM, SIGINT: main.c) and
		 * ignored SIGPIPE are not the program's: exec keeps both */
		int nul = open("/dev/null", O_RDONLY);
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		struct pollfd pf = { .fd = pipefd[0], .events = POLLIN };
		uint64_t now = rdb_now_ns();
		ssize_t got;

		if (now >= deadline_ns) {
			kill(pid, SIGKILL);
			rc = -ETIMEDOUT;
			break;
		}
		if (poll(&pf, 1, (int)((deadline_ns - now) / RDB_NS_PER_MS) + 1) <= 0)
			continue;
		if (cap - len < 2048) {
			char *nb = len < (1u << 20) ? realloc(buf, cap * 2) : NULL;

			if (!nb) {	/* more than a MiB: the rest is dropped */
				char sink[4096];

				got = read(pipefd[0], sink, sizeof(sink));
				if (got <= 0 && !(got < 0 && errno == EINTR))
					break;
				continue;
			}
			buf = nb;
			cap *= 2;
		}
		got = read(pipefd[0], buf + len, cap - len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	buf[len] = 0;
	close(pipefd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		rc = -EIO;
		if (code_out)
			*code_out = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	}
	if (out)
		*out = buf;
	else
		free(buf);
	return rc;
}
