from charlie.adapters.cli import main

main()
