// rl-queue: the sample store server and its command-line clients. See man/rl-queue.1.
#include "rl/queue/cli.h"

int main(int argc, char** argv) { return rl::queue::QueueMain(argc, argv); }
