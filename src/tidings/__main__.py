from tidings.cli.app import main

main()
