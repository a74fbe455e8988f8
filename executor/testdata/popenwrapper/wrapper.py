"""An agent that is a wrapper: it runs its worker with subprocess.Popen, as
many agent CLIs do, so the worker does not inherit the try lock (fd 3;
Popen closes every descriptor but the standard three). Arguments: the
worker's program, then --setsid to start the worker in a session of its
own, --piddir DIR to write the wrapper's pid to DIR/<step>, and last the
prompt, which the worker gets. The wrapper exits with the worker's status."""

import os
import subprocess
import sys


def main():
    args = sys.argv[1:]
    worker, prompt, rest = args[0], args[-1], args[1:-1]
    if "--piddir" in rest:
        path = os.path.join(rest[rest.index("--piddir") + 1], os.environ["STEPSEQ_STEP"])
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
    p = subprocess.Popen([worker, prompt], start_new_session="--setsid" in rest)
    sys.exit(p.wait())


main()
