// rl-queue: the sample store server and its command-line clients. See man/rl-queue.1.
#include "rl/health/spare.h"
#include "rl/queue/cli.h"

int main(int argc, char** argv) {
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run waits here until it is needed
  return rl::queue::QueueMain(argc, argv);
}
