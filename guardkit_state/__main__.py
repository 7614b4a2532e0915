from guardkit_state.cli import main

main()
