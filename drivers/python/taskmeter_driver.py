#!/usr/bin/env python3
"""taskmeter Python driver (worker protocol 6, protocol/README.md): the entry point. tm_core.py is
what every runtime shares; each runtime's module (tm_core.RUNTIMES) is imported only for its plans:

python-thread   a threading.Thread per unit; time.sleep; os.sched_yield() to yield      (tm_threads.py)
python-abs      a threading.Thread per unit; clock_nanosleep(TIMER_ABSTIME) via ctypes   (tm_threads.py)
python-asyncio  an asyncio task per unit in one loop; asyncio.sleep; asyncio.sleep(0)    (tm_asyncio.py)
python-trio     a trio task per unit in one trio.run; trio.sleep_until; checkpoint()     (tm_trio.py)
python-gevent   a greenlet per unit on gevent's hub; gevent.sleep; gevent.sleep(0)       (tm_gevent.py)
"""

import sys

from tm_core import main

if __name__ == "__main__":
    sys.exit(main())
