// servesim command line: subcommands inspect, run, sweep, calibrate, list.
int main() { return 0; }
