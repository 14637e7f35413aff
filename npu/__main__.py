import sys

from npu.cli import main

sys.exit(main())
