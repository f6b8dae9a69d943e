/* The pod sandbox's process for tests/k8s' local pause image: waits for
 * signals, reaps zombies, exits on SIGINT/SIGTERM (what registry.k8s.io/pause
 * does; built here because nothing prebuilt is downloaded). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }
static void on_chld(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

int main(void) {
  struct sigaction term = {.sa_handler = on_term}, chld = {.sa_handler = on_chld, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &term, NULL);
  sigaction(SIGTERM, &term, NULL);
  sigaction(SIGCHLD, &chld, NULL);
  for (;;) pause();
}
