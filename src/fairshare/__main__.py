from fairshare.cli import main

raise SystemExit(main())
