from geokit.cli import main

raise SystemExit(main())
