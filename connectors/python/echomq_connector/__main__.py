import sys

from .wire import main

sys.exit(main())
