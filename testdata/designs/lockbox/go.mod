module example.com/lockbox

go 1.26.0
