from salesreport.cli import main

raise SystemExit(main())
