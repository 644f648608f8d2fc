from profreport.cli import main

raise SystemExit(main())
